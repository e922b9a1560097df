package truv_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/partnergiving/giving/vendors/truv"
)

const (
	fixtureUser = "0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e"
	fixtureLink = "1f2e3d4c5b6a79881726354433221100"
	fixtureTask = "9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d"
)

func TestParseEventFixtures(t *testing.T) {
	cases := []struct {
		file    string
		ignored bool
		want    truv.Event
	}{
		{file: "task_switch_deposit.json", want: truv.Event{
			ID: "609d0b9c2c2f4e6f8f4b1e2a7c3d5e01", Type: truv.SwitchSubmitted, VendorType: "task-status-updated",
			Status: "switch_deposit", UserID: fixtureUser, Reference: "en_2xyz", LinkID: fixtureLink, TaskID: fixtureTask,
			Product: "deposit_switch", OccurredAt: time.Date(2026, 11, 28, 21, 4, 5, 123456000, time.UTC),
		}},
		{file: "task_done.json", want: truv.Event{
			ID: "609d0b9c2c2f4e6f8f4b1e2a7c3d5e02", Type: truv.SwitchConfirmed, VendorType: "task-status-updated",
			Status: "done", UserID: fixtureUser, Reference: "en_2xyz", LinkID: fixtureLink, TaskID: fixtureTask,
			Product: "deposit_switch", OccurredAt: time.Date(2026, 11, 28, 21, 6, 40, 123456000, time.UTC),
		}},
		{file: "task_config_error.json", want: truv.Event{
			ID: "609d0b9c2c2f4e6f8f4b1e2a7c3d5e03", Type: truv.SwitchFailed, VendorType: "task-status-updated",
			Status: "config_error", UserID: fixtureUser, Reference: "en_2xyz", LinkID: fixtureLink, TaskID: fixtureTask,
			Product: "deposit_switch", Reason: "config_error", OccurredAt: time.Date(2026, 11, 28, 21, 4, 5, 123456000, time.UTC),
		}},
		{file: "link_deleted.json", want: truv.Event{
			ID: "609d0b9c2c2f4e6f8f4b1e2a7c3d5e07", Type: truv.SwitchReverted, VendorType: "link-deleted",
			UserID: fixtureUser, Reference: "en_2xyz", LinkID: fixtureLink, Product: "deposit_switch",
			Reason: "link-deleted", OccurredAt: time.Date(2027, 3, 2, 10, 0, 0, 0, time.UTC),
		}},
		{file: "task_done_without_user.json", want: truv.Event{
			ID: "609d0b9c2c2f4e6f8f4b1e2a7c3d5e08", Type: truv.SwitchConfirmed, VendorType: "task-status-updated",
			Status: "done", LinkID: fixtureLink, TaskID: fixtureTask, Product: "deposit_switch",
			OccurredAt: time.Date(2026, 11, 28, 21, 6, 40, 500000000, time.UTC),
		}},
		{file: "task_login.json", ignored: true, want: truv.Event{
			ID: "609d0b9c2c2f4e6f8f4b1e2a7c3d5e04", VendorType: "task-status-updated", Status: "login",
			UserID: fixtureUser, Reference: "en_2xyz", LinkID: fixtureLink, TaskID: fixtureTask,
			Product: "deposit_switch", OccurredAt: time.Date(2026, 11, 28, 21, 4, 5, 123456000, time.UTC),
		}},
		{file: "task_income_done.json", ignored: true, want: truv.Event{
			ID: "609d0b9c2c2f4e6f8f4b1e2a7c3d5e05", VendorType: "task-status-updated", Status: "done",
			UserID: fixtureUser, Reference: "en_2xyz", LinkID: fixtureLink, TaskID: fixtureTask,
			Product: "income", OccurredAt: time.Date(2026, 11, 28, 21, 4, 5, 123456000, time.UTC),
		}},
		{file: "link_connected.json", ignored: true, want: truv.Event{
			ID: "609d0b9c2c2f4e6f8f4b1e2a7c3d5e06", VendorType: "link-connected",
			UserID: fixtureUser, Reference: "en_2xyz", LinkID: fixtureLink, Product: "deposit_switch",
			OccurredAt: time.Date(2026, 11, 28, 21, 4, 1, 0, time.UTC),
		}},
	}
	for _, tc := range cases {
		t.Run(tc.file, func(t *testing.T) {
			body, err := os.ReadFile(filepath.Join("testdata", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			got, err := truv.ParseEvent(body)
			if tc.ignored != errors.Is(err, truv.ErrIgnored) {
				t.Fatalf("err = %v, ignored want %v", err, tc.ignored)
			}
			if !tc.ignored && err != nil {
				t.Fatalf("err = %v", err)
			}
			if !got.OccurredAt.Equal(tc.want.OccurredAt) {
				t.Errorf("occurred at %s, want %s", got.OccurredAt, tc.want.OccurredAt)
			}
			got.OccurredAt = tc.want.OccurredAt
			if got != tc.want {
				t.Errorf("event\n got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestParseEventRefusesWhatIsNotATruvWebhook(t *testing.T) {
	cases := map[string]string{
		"not JSON":          `webhook_id=1`,
		"no webhook id":     `{"event_type":"task-status-updated","event_created_at":"2026-11-28T21:04:05Z"}`,
		"no event type":     `{"webhook_id":"w","event_created_at":"2026-11-28T21:04:05Z"}`,
		"no time":           `{"webhook_id":"w","event_type":"task-status-updated"}`,
		"time not ISO 8601": `{"webhook_id":"w","event_type":"task-status-updated","event_created_at":"28/11/2026"}`,
		"the old envelope":  `{"id":"evt_1","type":"deposit_switch.confirmed","created_at":"2026-11-28T21:04:05Z","data":{}}`,
	}
	for name, body := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := truv.ParseEvent([]byte(body))
			if err == nil || errors.Is(err, truv.ErrIgnored) {
				t.Errorf("err = %v, want a refusal that is not ErrIgnored", err)
			}
		})
	}
}

// TestBuildSignVerifyParse is the path the sandbox takes: build Truv's body,
// sign it Truv's way, and the production edge's verification and parsing
// give back the same outcome.
func TestBuildSignVerifyParse(t *testing.T) {
	at := time.Date(2026, 11, 28, 21, 4, 5, 678901000, time.UTC)
	cases := []truv.Event{
		{Type: truv.SwitchSubmitted, UserID: fixtureUser, Reference: "en_1", LinkID: fixtureLink, TaskID: fixtureTask, OccurredAt: at},
		{Type: truv.SwitchConfirmed, UserID: fixtureUser, Reference: "en_1", LinkID: fixtureLink, TaskID: fixtureTask, OccurredAt: at},
		{Type: truv.SwitchFailed, Reason: "mfa_error", UserID: fixtureUser, Reference: "en_1", LinkID: fixtureLink, TaskID: fixtureTask, OccurredAt: at},
		{Type: truv.SwitchFailed, UserID: fixtureUser, LinkID: fixtureLink, TaskID: fixtureTask, OccurredAt: at},
		{Type: truv.SwitchReverted, ID: "fixed-id", UserID: fixtureUser, Reference: "en_1", LinkID: fixtureLink, OccurredAt: at},
	}
	v := truv.Verifier{Secrets: []string{testSecret}, MaxAge: time.Hour, Now: func() time.Time { return at.Add(time.Minute) }}
	for _, in := range cases {
		t.Run(string(in.Type)+in.Reason, func(t *testing.T) {
			body, err := truv.BuildEvent(in)
			if err != nil {
				t.Fatalf("build: %v", err)
			}
			if err := v.Verify(truv.Sign(testSecret, body), body); err != nil {
				t.Fatalf("verify: %v", err)
			}
			if err := v.Verify(truv.Sign("sandbox-wrong", body), body); !errors.Is(err, truv.ErrBadSignature) {
				t.Fatalf("verify with the wrong secret: %v", err)
			}
			got, err := truv.ParseEvent(body)
			if err != nil {
				t.Fatalf("parse %s: %v", body, err)
			}
			if got.Type != in.Type || got.UserID != in.UserID || got.Reference != in.Reference ||
				got.LinkID != in.LinkID || got.TaskID != in.TaskID || !got.OccurredAt.Equal(at) {
				t.Errorf("parsed %+v from %+v", got, in)
			}
			if in.ID != "" && got.ID != in.ID {
				t.Errorf("id %q, want %q", got.ID, in.ID)
			}
			if got.ID == "" || got.Product != truv.ProductDepositSwitch {
				t.Errorf("parsed %+v: want an id and the deposit_switch product", got)
			}
			wantReason := in.Reason
			if in.Type == truv.SwitchFailed && wantReason == "" {
				wantReason = "error" // Truv's generic task error
			}
			if in.Type == truv.SwitchReverted {
				wantReason = truv.EventLinkDeleted
			}
			if got.Reason != wantReason {
				t.Errorf("reason %q, want %q", got.Reason, wantReason)
			}
		})
	}
}

func TestBuildEventGivesEachWebhookItsOwnID(t *testing.T) {
	e := truv.Event{Type: truv.SwitchConfirmed, LinkID: fixtureLink, TaskID: fixtureTask}
	a, _ := truv.BuildEvent(e)
	b, _ := truv.BuildEvent(e)
	ea, _ := truv.ParseEvent(a)
	eb, _ := truv.ParseEvent(b)
	if ea.ID == "" || ea.ID == eb.ID {
		t.Errorf("ids %q and %q, want two distinct ids", ea.ID, eb.ID)
	}
	if time.Since(ea.OccurredAt) > time.Minute {
		t.Errorf("occurred at %s, want now", ea.OccurredAt)
	}
}

func TestBuildEventRefusesWhatTruvWouldNotSend(t *testing.T) {
	cases := map[string]truv.Event{
		"unknown type":                 {Type: "switch_paused", LinkID: fixtureLink, TaskID: fixtureTask},
		"failure that is not an error": {Type: truv.SwitchFailed, Reason: "done", LinkID: fixtureLink, TaskID: fixtureTask},
		"no link":                      {Type: truv.SwitchConfirmed, TaskID: fixtureTask},
		"task event without a task":    {Type: truv.SwitchSubmitted, LinkID: fixtureLink},
	}
	for name, e := range cases {
		t.Run(name, func(t *testing.T) {
			if body, err := truv.BuildEvent(e); err == nil {
				t.Errorf("built %s", body)
			}
		})
	}
}

func TestBuiltEventsCarryOnlyTruvFields(t *testing.T) {
	body, err := truv.BuildEvent(truv.Event{Type: truv.SwitchSubmitted, UserID: fixtureUser, Reference: "en_1", LinkID: fixtureLink, TaskID: fixtureTask})
	if err != nil {
		t.Fatal(err)
	}
	got := mapKeys(decodeObject(t, body))
	want := []string{"data_source", "event_created_at", "event_type", "link_id", "product", "status", "task_id", "tracking_info", "user_id", "webhook_id"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("fields %v, want %v", got, want)
	}
}
