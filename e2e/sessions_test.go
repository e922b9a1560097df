package e2e

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/httpapi/apitest"
)

// importChurch creates one church for the client's partner.
func importChurch(t *testing.T, c *apitest.Client, name string) string {
	t.Helper()
	var out importResponse
	c.Do(http.MethodPost, "/v1/churches/import", `{"churches":[{"name":"`+name+`"}]}`, nil).JSON(t, &out)
	if len(out.Results) != 1 || out.Results[0].Church == nil {
		t.Fatalf("import %s failed", name)
	}
	return out.Results[0].Church.ID
}

type sessionResponse struct {
	ID           string  `json:"id"`
	URL          string  `json:"url"`
	ExpiresAt    string  `json:"expires_at"`
	ChurchID     string  `json:"church_id"`
	DonorID      string  `json:"donor_id"`
	Mode         string  `json:"mode"`
	Value        float64 `json:"value"`
	Status       string  `json:"status"`
	EnrollmentID *string `json:"enrollment_id"`
}

func sessionBody(church, phone, mode, value, redirect string) string {
	return `{"church_id":"` + church + `","donor_phone":"` + phone + `","mode":"` + mode + `","value":` + value + `,"redirect_url":"` + redirect + `"}`
}

func TestCreateDonorSession(t *testing.T) {
	t.Parallel()
	ts := startStack(t)
	c, _ := ts.partner(t, "https://partner.example")
	other, _ := ts.partner(t, "https://partner.example")
	church := importChurch(t, c, "Grace")
	otherChurch := importChurch(t, other, "Elsewhere")

	resp := c.Do(http.MethodPost, "/v1/donor_sessions", sessionBody(church, "+12025550100", "pct", "3.5", "https://partner.example/done?x=1"), nil)
	if resp.Status != http.StatusCreated {
		t.Fatalf("create: %d %s", resp.Status, resp.Body)
	}
	var s sessionResponse
	resp.JSON(t, &s)
	if !domain.ValidID(domain.PrefixSession, s.ID) || !domain.ValidID(domain.PrefixDonor, s.DonorID) || s.Status != "open" || s.Mode != "pct" || s.Value != 3.5 || s.ChurchID != church {
		t.Fatalf("session: %+v", s)
	}
	token, ok := strings.CutPrefix(s.URL, ts.URL+"/flow/")
	if !ok || len(token) < 43 {
		t.Fatalf("url %q is not <public url>/flow/<256-bit token>", s.URL)
	}
	exp, _ := time.Parse(domain.TimeLayout, s.ExpiresAt)
	if d := time.Until(exp); d < 29*time.Minute || d > 30*time.Minute {
		t.Fatalf("expires in %s, want 30 minutes", d)
	}
	if strings.Contains(string(resp.Body), "2025550100") {
		t.Fatal("the phone appears in the response")
	}

	// The same phone gives the same donor id for this partner, another
	// partner gets another id.
	var again, theirs sessionResponse
	c.Do(http.MethodPost, "/v1/donor_sessions", sessionBody(church, "+12025550100", "fixed", "25.50", "https://partner.example/"), nil).JSON(t, &again)
	other.Do(http.MethodPost, "/v1/donor_sessions", sessionBody(otherChurch, "+12025550100", "pct", "1", "https://partner.example/"), nil).JSON(t, &theirs)
	if again.DonorID != s.DonorID || theirs.DonorID == s.DonorID {
		t.Fatalf("donor ids: %s %s %s", s.DonorID, again.DonorID, theirs.DonorID)
	}

	// GET shows the status without url or phone; another partner gets 404.
	got := c.Do(http.MethodGet, "/v1/donor_sessions/"+s.ID, nil, nil)
	if got.Status != http.StatusOK || strings.Contains(string(got.Body), "url") || strings.Contains(string(got.Body), "2025550100") {
		t.Fatalf("get: %d %s", got.Status, got.Body)
	}
	if r := other.Do(http.MethodGet, "/v1/donor_sessions/"+s.ID, nil, nil); r.Status != http.StatusNotFound {
		t.Fatalf("foreign get: %d", r.Status)
	}

	// An idempotent replay answers with the same session and url.
	key := apitest.Header{"Idempotency-Key": "sess-1"}
	first := c.Do(http.MethodPost, "/v1/donor_sessions", sessionBody(church, "+12025550101", "pct", "2", "https://partner.example/"), key)
	second := c.Do(http.MethodPost, "/v1/donor_sessions", sessionBody(church, "+12025550101", "pct", "2", "https://partner.example/"), key)
	if first.Status != http.StatusCreated || second.Status != http.StatusOK || string(first.Body) != string(second.Body) {
		t.Fatalf("replay: %d %d\n%s\n%s", first.Status, second.Status, first.Body, second.Body)
	}
}

func TestDonorSessionValidation(t *testing.T) {
	t.Parallel()
	ts := startStack(t)
	c, _ := ts.partner(t, "https://partner.example", "https://app.partner.example:8443")
	other, _ := ts.partner(t)
	church := importChurch(t, c, "Grace")
	foreign := importChurch(t, other, "Theirs")
	ok := map[string]string{"church_id": `"` + church + `"`, "donor_phone": `"+12025550100"`, "mode": `"pct"`, "value": "3", "redirect_url": `"https://partner.example/back"`}
	build := func(over map[string]string) string {
		var parts []string
		for _, k := range []string{"church_id", "donor_phone", "mode", "value", "redirect_url"} {
			v, set := over[k]
			if !set {
				v = ok[k]
			}
			if v == "-" {
				continue
			}
			parts = append(parts, `"`+k+`":`+v)
		}
		return "{" + strings.Join(parts, ",") + "}"
	}
	cases := []struct {
		name  string
		over  map[string]string
		field string
	}{
		{"missing church", map[string]string{"church_id": "-"}, "church_id"},
		{"unknown church", map[string]string{"church_id": `"ch_2pQm3s8JmYc5B9vXk0QeLr1nD7a"`}, "church_id"},
		{"foreign church", map[string]string{"church_id": `"` + foreign + `"`}, "church_id"},
		{"garbage church", map[string]string{"church_id": `"x"`}, "church_id"},
		{"missing phone", map[string]string{"donor_phone": "-"}, "donor_phone"},
		{"phone without plus", map[string]string{"donor_phone": `"12025550100"`}, "donor_phone"},
		{"phone with spaces", map[string]string{"donor_phone": `"+1 202 555 0100"`}, "donor_phone"},
		{"impossible phone", map[string]string{"donor_phone": `"+15555555555"`}, "donor_phone"},
		{"too short phone", map[string]string{"donor_phone": `"+1202555010"`}, "donor_phone"},
		{"bad country", map[string]string{"donor_phone": `"+999123456"`}, "donor_phone"},
		{"unknown mode", map[string]string{"mode": `"percent"`}, "mode"},
		{"missing mode", map[string]string{"mode": "-"}, "mode"},
		{"pct zero", map[string]string{"value": "0"}, "value"},
		{"pct over 100", map[string]string{"value": "100.01"}, "value"},
		{"pct three decimals", map[string]string{"value": "3.125"}, "value"},
		{"pct negative", map[string]string{"value": "-1"}, "value"},
		{"value as string", map[string]string{"value": `"3"`}, "value"},
		{"value exponent", map[string]string{"value": "1e400"}, "value"},
		{"fixed three decimals", map[string]string{"mode": `"fixed"`, "value": "10.101"}, "value"},
		{"fixed too large", map[string]string{"mode": `"fixed"`, "value": "100000.01"}, "value"},
		{"fixed zero", map[string]string{"mode": `"fixed"`, "value": "0"}, "value"},
		{"missing value", map[string]string{"value": "-"}, "value"},
		{"http redirect", map[string]string{"redirect_url": `"http://partner.example/back"`}, "redirect_url"},
		{"relative redirect", map[string]string{"redirect_url": `"/back"`}, "redirect_url"},
		{"userinfo redirect", map[string]string{"redirect_url": `"https://u:p@partner.example/back"`}, "redirect_url"},
		{"other port", map[string]string{"redirect_url": `"https://partner.example:444/back"`}, "redirect_url"},
		{"host suffix", map[string]string{"redirect_url": `"https://partner.example.evil.com/back"`}, "redirect_url"},
		{"host prefix", map[string]string{"redirect_url": `"https://evilpartner.example/back"`}, "redirect_url"},
		{"subdomain", map[string]string{"redirect_url": `"https://x.partner.example/back"`}, "redirect_url"},
		{"allowlisted port missing", map[string]string{"redirect_url": `"https://app.partner.example/back"`}, "redirect_url"},
		{"too long", map[string]string{"redirect_url": `"https://partner.example/` + strings.Repeat("a", 2048) + `"`}, "redirect_url"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c.TB = t
			resp := c.Do(http.MethodPost, "/v1/donor_sessions", build(tc.over), nil)
			if resp.Status != http.StatusUnprocessableEntity {
				t.Fatalf("%d %s", resp.Status, resp.Body)
			}
			var p struct {
				Type   string
				Errors []struct{ Field, Detail string }
			}
			resp.JSON(t, &p)
			if p.Type != "/problems/validation-error" || len(p.Errors) != 1 || p.Errors[0].Field != tc.field {
				t.Fatalf("want one error on %s, got %s", tc.field, resp.Body)
			}
			if phone := digits(tc.over["donor_phone"]); len(phone) > 3 && strings.Contains(digits(string(resp.Body)), phone) {
				t.Fatalf("the phone is echoed: %s", resp.Body)
			}
		})
	}
	c.TB = t
	// Allowlisted variants pass: the exact port, the default port written out.
	for _, u := range []string{"https://app.partner.example:8443/x", "https://partner.example:443/x", "https://PARTNER.example/x"} {
		if r := c.Do(http.MethodPost, "/v1/donor_sessions", build(map[string]string{"redirect_url": `"` + u + `"`}), nil); r.Status != http.StatusCreated {
			t.Errorf("%s: %d %s", u, r.Status, r.Body)
		}
	}
	// Every bad field is reported at once.
	resp := c.Do(http.MethodPost, "/v1/donor_sessions", `{"church_id":"x","donor_phone":"1","mode":"pct","value":0,"redirect_url":"http://x"}`, nil)
	if n := len(resp.Map(t)["errors"].([]any)); n != 4 {
		t.Fatalf("want 4 field errors, got %d: %s", n, resp.Body)
	}
}

func digits(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= '0' && r <= '9' {
			return r
		}
		return -1
	}, s)
}
