package e2e

import (
	"net/http"
	"testing"

	"github.com/partnergiving/giving/httpapi/apitest"
)

// Error answers a partner engineer can act on without guessing: a 415 names
// the media type expected and the one sent, and one unknown field does not
// hide the body's other field errors. Every answer is also checked against
// the OpenAPI document by the client.
func TestProblemDetailsNameTheFix(t *testing.T) {
	t.Parallel()
	ts := startStack(t)
	c, _ := ts.partner(t, "https://partner.example")

	p := checkProblem(t, c.Do(http.MethodPost, "/v1/webhook_endpoints", `{"url":"http://127.0.0.1:9/x","event_types":["*"]}`,
		apitest.Header{"Content-Type": "text/plain"}), 415, "unsupported-media-type")
	if want := "Send the body as JSON with Content-Type: application/json; got text/plain."; p["detail"] != want {
		t.Fatalf("415 detail %q, want %q", p["detail"], want)
	}

	p = checkProblem(t, c.Do(http.MethodPost, "/v1/donor_sessions",
		`{"church_id":5,"donor_phone":"+12025550100","mode":"pct","value":3,"redirect_url":"https://partner.example/done","colour":"red"}`, nil),
		422, "validation-error")
	fe := fieldErrors(t, p)
	if len(fe) != 2 || fe["church_id"] != "must be a string, not number" || fe["colour"] != "is not a known field" {
		t.Fatalf("want church_id and colour reported together, got %v", p["errors"])
	}
}
