package app_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/partnergiving/giving/app"
	"github.com/partnergiving/giving/domain"
)

// sessionRequest is a valid request for a donor session at church.
func sessionRequest(church string) app.SessionRequest {
	return app.SessionRequest{
		ChurchID: ptr(church), DonorPhone: ptr("+12025550123"), Mode: ptr("pct"),
		Value: json.RawMessage("5"), RedirectURL: ptr(partnerOrigin + "/done"),
	}
}

func TestCreateSession(t *testing.T) {
	t.Parallel()
	in := startInstance(t)
	for name, tc := range map[string]struct {
		change func(r *app.SessionRequest)
		fields []string // the fields at fault, or none for a created session
	}{
		"valid":                  {change: func(*app.SessionRequest) {}},
		"fixed amount":           {change: func(r *app.SessionRequest) { r.Mode, r.Value = ptr("fixed"), json.RawMessage("25.50") }},
		"nothing sent":           {change: func(r *app.SessionRequest) { *r = app.SessionRequest{} }, fields: []string{"church_id", "donor_phone", "mode", "redirect_url"}},
		"no value":               {change: func(r *app.SessionRequest) { r.Value = nil }, fields: []string{"value"}},
		"a null value":           {change: func(r *app.SessionRequest) { r.Value = json.RawMessage("null") }, fields: []string{"value"}},
		"a string value":         {change: func(r *app.SessionRequest) { r.Value = json.RawMessage(`"5"`) }, fields: []string{"value"}},
		"an unknown mode":        {change: func(r *app.SessionRequest) { r.Mode = ptr("percent") }, fields: []string{"mode"}},
		"not a church id":        {change: func(r *app.SessionRequest) { r.ChurchID = ptr("nope") }, fields: []string{"church_id"}},
		"an unknown church":      {change: func(r *app.SessionRequest) { r.ChurchID = ptr(domain.NewID(domain.PrefixChurch)) }, fields: []string{"church_id"}},
		"a local phone":          {change: func(r *app.SessionRequest) { r.DonorPhone = ptr("2025550199") }, fields: []string{"donor_phone"}},
		"a phone that can't be":  {change: func(r *app.SessionRequest) { r.DonorPhone = ptr("+10005550123") }, fields: []string{"donor_phone"}},
		"an http redirect":       {change: func(r *app.SessionRequest) { r.RedirectURL = ptr("http://partner.example/done") }, fields: []string{"redirect_url"}},
		"a redirect with a user": {change: func(r *app.SessionRequest) { r.RedirectURL = ptr("https://u:p@partner.example/done") }, fields: []string{"redirect_url"}},
		"a redirect elsewhere":   {change: func(r *app.SessionRequest) { r.RedirectURL = ptr("https://attacker.example/done") }, fields: []string{"redirect_url"}},
		"a relative redirect":    {change: func(r *app.SessionRequest) { r.RedirectURL = ptr("/done") }, fields: []string{"redirect_url"}},
		"a redirect far too long": {change: func(r *app.SessionRequest) {
			r.RedirectURL = ptr(partnerOrigin + "/" + strings.Repeat("a", domain.MaxRedirectURL))
		}, fields: []string{"redirect_url"}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			p := in.partner(t)
			c := in.church(t, p)
			req := sessionRequest(c.ID)
			tc.change(&req)
			got, err := in.App.CreateSession(ctx, p, req)
			if tc.fields != nil {
				wantProblem(t, err, domain.ProblemValidation.Code)
				var fields []string
				for _, f := range err.(*domain.Error).Fields {
					fields = append(fields, f.Field)
					if req.DonorPhone != nil && *req.DonorPhone != "" && strings.Contains(f.Detail, *req.DonorPhone) {
						t.Errorf("%s: the detail echoes the phone: %q", f.Field, f.Detail)
					}
				}
				slices.Sort(fields)
				if !slices.Equal(fields, tc.fields) {
					t.Errorf("fields at fault %v, want %v", fields, tc.fields)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			s := got.Session
			if !domain.ValidID(domain.PrefixSession, s.ID) || s.PartnerID != p || s.ChurchID != c.ID || s.DonorID == "" {
				t.Errorf("session %+v", s)
			}
			if !strings.HasPrefix(got.URL, in.App.PublicURL()+"/flow/") {
				t.Errorf("url %q is not under %s/flow/", got.URL, in.App.PublicURL())
			}
			// The url's token opens the session (once this instance's
			// writes are applied, as the transport waits for before every
			// request), and only its hash is kept.
			if err := in.App.SeeWrites(ctx); err != nil {
				t.Fatal(err)
			}
			token := strings.TrimPrefix(got.URL, in.App.PublicURL()+"/flow/")
			found, ok, err := in.App.SessionByToken(token)
			if err != nil || !ok || found.ID != s.ID {
				t.Fatalf("the url's token finds %+v %v %v", found, ok, err)
			}
			if strings.Contains(string(mustJSON(t, s)), token) {
				t.Error("the session holds its url's token")
			}
			if n := in.events(t, p, s.ID, "donor_session.created"); n != 1 {
				t.Errorf("%d donor_session.created events, want 1", n)
			}
		})
	}

	t.Run("the same donor at two partners is two donors", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		a, b := in.partner(t), in.partner(t)
		sa, err := in.App.CreateSession(ctx, a, sessionRequest(in.church(t, a).ID))
		if err != nil {
			t.Fatal(err)
		}
		sb, err := in.App.CreateSession(ctx, b, sessionRequest(in.church(t, b).ID))
		if err != nil {
			t.Fatal(err)
		}
		again, err := in.App.CreateSession(ctx, a, sessionRequest(sa.Session.ChurchID))
		if err != nil {
			t.Fatal(err)
		}
		if sa.Session.DonorID == sb.Session.DonorID {
			t.Error("two partners see the same donor id for one phone")
		}
		if again.Session.DonorID != sa.Session.DonorID || again.Session.ID == sa.Session.ID {
			t.Errorf("a second session of the donor at one partner: donor %s (want %s), session %s", again.Session.DonorID, sa.Session.DonorID, again.Session.ID)
		}
		phone, err := in.App.PhoneEnding(ctx, sa.Session)
		if err != nil || phone != "23" {
			t.Errorf("phone ending %q %v, want 23", phone, err)
		}
	})

	t.Run("another partner's church is not one", func(t *testing.T) {
		t.Parallel()
		owner, other := in.partner(t), in.partner(t)
		_, err := in.App.CreateSession(context.Background(), other, sessionRequest(in.church(t, owner).ID))
		wantProblem(t, err, domain.ProblemValidation.Code)
	})
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
