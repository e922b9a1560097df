package e2e

import (
	"net/http"
	"testing"

	"github.com/partnergiving/giving/httpapi/apitest"
)

type churchResponse struct {
	ID         string  `json:"id"`
	Name       string  `json:"name"`
	ExternalID *string `json:"external_id"`
	Status     string  `json:"status"`
	ArchivedAt *string `json:"archived_at"`
}

// A church is renamed and given another external id under the import's
// rules; the change is idempotent like every write; bad input is a
// problem+json 4xx; another partner's church is a 404.
func TestUpdateChurch(t *testing.T) {
	t.Parallel()
	ts := startStack(t)
	c, _ := ts.partner(t)
	var imp importResponse
	c.Do(http.MethodPost, "/v1/churches/import", `{"churches":[{"name":"Grace","external_id":"crm-1"},{"name":"Hope","external_id":"crm-2"}]}`, nil).JSON(t, &imp)
	grace, hope := imp.Results[0].Church.ID, imp.Results[1].Church.ID

	key := apitest.Header{"Idempotency-Key": "rename-grace"}
	resp := c.Do(http.MethodPatch, "/v1/churches/"+grace, `{"name":"  Grace Chapel  ","external_id":"crm-9"}`, key)
	var got churchResponse
	resp.JSON(t, &got)
	if resp.Status != http.StatusOK || got.Name != "Grace Chapel" || got.ExternalID == nil || *got.ExternalID != "crm-9" || got.Status != "active" {
		t.Fatalf("rename: %d %s", resp.Status, resp.Body)
	}
	again := c.Do(http.MethodPatch, "/v1/churches/"+grace, `{"name":"  Grace Chapel  ","external_id":"crm-9"}`, key)
	if again.Status != http.StatusOK || again.Header.Get("Idempotent-Replayed") != "true" || string(again.Body) != string(resp.Body) {
		t.Fatalf("replay: %d %q %s", again.Status, again.Header.Get("Idempotent-Replayed"), again.Body)
	}
	if r := c.Do(http.MethodPatch, "/v1/churches/"+grace, `{"name":"Other"}`, key); r.Status != http.StatusUnprocessableEntity || r.Map(t)["type"] != "/problems/idempotency-key-reused" {
		t.Fatalf("same key, other body: %d %s", r.Status, r.Body)
	}
	if r := c.Do(http.MethodPatch, "/v1/churches/"+grace, `{"name":"x"}`, apitest.Header{"Idempotency-Key": ""}); r.Status != http.StatusBadRequest || r.Map(t)["type"] != "/problems/idempotency-key-missing" {
		t.Fatalf("no key: %d %s", r.Status, r.Body)
	}
	// The old external id is free again; the new one is taken.
	if r := c.Do(http.MethodPatch, "/v1/churches/"+hope, `{"external_id":"crm-1"}`, nil); r.Status != http.StatusOK {
		t.Fatalf("take the freed external id: %d %s", r.Status, r.Body)
	}
	if r := c.Do(http.MethodPatch, "/v1/churches/"+hope, `{"external_id":"crm-9"}`, nil); r.Status != http.StatusConflict || r.Map(t)["type"] != "/problems/external-id-taken" {
		t.Fatalf("taken external id: %d %s", r.Status, r.Body)
	}
	var rows importResponse
	c.Do(http.MethodPost, "/v1/churches/import", `{"churches":[{"name":"New","external_id":"crm-9"}]}`, nil).JSON(t, &rows)
	if rows.Results[0].Status != "rejected" {
		t.Fatalf("an import reusing the renamed external id: %+v", rows.Results[0])
	}
	if r := c.Do(http.MethodPatch, "/v1/churches/"+hope, `{"external_id":null}`, nil); r.Status != http.StatusOK || r.Map(t)["external_id"] != nil {
		t.Fatalf("remove the external id: %d %s", r.Status, r.Body)
	}

	for _, bad := range []struct{ body, field string }{
		{`{}`, "name"},
		{`{"name":"   "}`, "name"},
		{`{"name":null}`, "name"},
		{`{"name":5}`, "name"},
		{`{"external_id":""}`, "external_id"},
		{`{"external_id":7}`, "external_id"},
		{`{"name":"a\u0007b"}`, "name"},
		{`{"name":"ok","color":"red"}`, "color"},
	} {
		r := c.Do(http.MethodPatch, "/v1/churches/"+hope, bad.body, nil)
		if r.Status != http.StatusUnprocessableEntity || r.Header.Get("Content-Type") != "application/problem+json" || fieldErrors(t, r.Map(t))[bad.field] == "" {
			t.Errorf("%s: %d %s, want 422 naming %s", bad.body, r.Status, r.Body, bad.field)
		}
	}
	if r := c.Do(http.MethodPatch, "/v1/churches/"+hope, `{"name":`, nil); r.Status != http.StatusBadRequest || r.Map(t)["type"] != "/problems/malformed-json" {
		t.Errorf("malformed body: %d %s", r.Status, r.Body)
	}

	other, _ := ts.partner(t)
	if r := other.Do(http.MethodPatch, "/v1/churches/"+grace, `{"name":"Mine"}`, nil); r.Status != http.StatusNotFound {
		t.Fatalf("another partner's church: %d %s", r.Status, r.Body)
	}
	c.Do(http.MethodGet, "/v1/churches/"+grace, nil, nil).JSON(t, &got)
	if got.Name != "Grace Chapel" {
		t.Fatalf("after another partner's attempt: %+v", got)
	}
}

// An archived church stays readable and listed, refuses new donor sessions
// with a problem that says so, and cannot be changed; archiving again
// changes nothing.
func TestArchiveChurch(t *testing.T) {
	t.Parallel()
	ts := startStack(t)
	c, _ := ts.partner(t)
	church := importChurch(t, c, "Grace")

	key := apitest.Header{"Idempotency-Key": "archive-grace"}
	resp := c.Do(http.MethodPost, "/v1/churches/"+church+"/archive", nil, key)
	var got churchResponse
	resp.JSON(t, &got)
	if resp.Status != http.StatusOK || got.Status != "archived" || got.ArchivedAt == nil {
		t.Fatalf("archive: %d %s", resp.Status, resp.Body)
	}
	if again := c.Do(http.MethodPost, "/v1/churches/"+church+"/archive", nil, key); again.Header.Get("Idempotent-Replayed") != "true" || string(again.Body) != string(resp.Body) {
		t.Fatalf("replay: %d %s", again.Status, again.Body)
	}
	if second := c.Do(http.MethodPost, "/v1/churches/"+church+"/archive", `{}`, nil); string(second.Body) != string(resp.Body) {
		t.Fatalf("archiving again changed the church: %s, was %s", second.Body, resp.Body)
	}
	if read := c.Do(http.MethodGet, "/v1/churches/"+church, nil, nil); string(read.Body) != string(resp.Body) {
		t.Fatalf("read back: %s, want %s", read.Body, resp.Body)
	}
	var read churchResponse

	r := c.Do(http.MethodPost, "/v1/donor_sessions", sessionBody(church, "+12025550100", "pct", "3", "https://partner.example/done"), nil)
	if r.Status != http.StatusConflict || r.Map(t)["type"] != "/problems/church-archived" {
		t.Fatalf("a session for an archived church: %d %s", r.Status, r.Body)
	}
	if r := c.Do(http.MethodPatch, "/v1/churches/"+church, `{"name":"Renamed"}`, nil); r.Status != http.StatusConflict || r.Map(t)["type"] != "/problems/church-archived" {
		t.Fatalf("renaming an archived church: %d %s", r.Status, r.Body)
	}
	if r := c.Do(http.MethodPost, "/v1/churches/"+church+"/archive", `{"now":true}`, nil); r.Status != http.StatusUnprocessableEntity {
		t.Fatalf("archive with a body: %d %s", r.Status, r.Body)
	}

	other, _ := ts.partner(t)
	if r := other.Do(http.MethodPost, "/v1/churches/"+church+"/archive", nil, nil); r.Status != http.StatusNotFound {
		t.Fatalf("another partner's church: %d %s", r.Status, r.Body)
	}
	active := importChurch(t, c, "Hope")
	if r := other.Do(http.MethodPost, "/v1/churches/"+active+"/archive", nil, nil); r.Status != http.StatusNotFound {
		t.Fatalf("another partner's active church: %d %s", r.Status, r.Body)
	}
	c.Do(http.MethodGet, "/v1/churches/"+active, nil, nil).JSON(t, &read)
	if read.Status != "active" || read.ArchivedAt != nil {
		t.Fatalf("after another partner's attempt: %+v", read)
	}
	openSession(t, c, active, "+12025550100", "pct", "3", "https://partner.example/done")
}
