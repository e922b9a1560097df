package e2e

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/httpapi/apitest"
)

// An operator gives a partner its brand at onboarding and changes it later
// (flags or their GIVING_* variables); bad input is refused naming the
// flag; the running service's pages show the change.
func TestCLIPartnerBrand(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := decodeCLI(t, runCLI(t, append(offline(dir), "GIVING_TERMS_URL=https://acme.example/terms"),
		"partners", "create", "--name", "Acme Church Software", "--redirect-origin", "https://partner.example",
		"--display-name", "Acme Giving", "--logo-url", "https://cdn.acme.example/logo.png", "--support-email", "help@acme.example",
		"--privacy-url", "https://acme.example/privacy", "--json"))

	for _, tt := range []struct {
		name string
		env  []string
		args []string
		code int
		want []string
	}{
		{"an http logo", nil, []string{"partners", "create", "--name", "X", "--logo-url", "http://cdn.acme.example/logo.png"}, 1,
			[]string{"--logo-url: must be an https URL"}},
		{"two support contacts", nil, []string{"partners", "create", "--name", "X", "--support-url", "https://x.example/help", "--support-email", "help@x.example"}, 1,
			[]string{"--support-email: give a support URL or a support email, not both"}},
		{"production without support, privacy or terms", []string{"GIVING_ENV=production"}, []string{"partners", "create", "--name", "X", "--display-name", "X Giving"}, 1,
			[]string{"--support-url: a production partner needs a support URL or a support email", "--privacy-url: a production partner needs a privacy page", "--terms-url: a production partner needs a terms page"}},
		{"a bad email from the environment", []string{"GIVING_SUPPORT_EMAIL=not-an-email"}, []string{"partners", "update", "--partner", p.PartnerID}, 1,
			[]string{"--support-email: must be an email address"}},
		{"nothing to change", nil, []string{"partners", "update", "--partner", p.PartnerID}, 2,
			[]string{"nothing to change: give at least one of --display-name, --logo-url, --support-url, --support-email, --privacy-url, --terms-url"}},
		{"no partner", nil, []string{"partners", "update", "--display-name", "X"}, 2, []string{"--partner is required"}},
		{"an unknown partner", nil, []string{"partners", "update", "--partner", domain.NewID(domain.PrefixPartner), "--display-name", "X"}, 1, []string{"No partner with id"}},
	} {
		r := runCLI(t, append(offline(dir), tt.env...), tt.args...)
		for _, want := range tt.want {
			if r.Code != tt.code || !strings.Contains(r.Stderr, want) {
				t.Errorf("%s: exit %d (want %d), stderr lacks %q:\n%s", tt.name, r.Code, tt.code, want, r.Stderr)
			}
		}
	}

	// An update changes the flags given, and only those; a support page
	// replaces the support email.
	r := runCLI(t, offline(dir), "partners", "update", "--partner", p.PartnerID, "--display-name", "Acme Church Giving", "--support-url", "https://acme.example/help", "--logo-url", "")
	if r.Code != 0 || !strings.Contains(r.Stdout, "display-name:  Acme Church Giving") || !strings.Contains(r.Stdout, "support-url:   https://acme.example/help") ||
		!strings.Contains(r.Stdout, "terms-url:     https://acme.example/terms") || strings.Contains(r.Stdout, "help@acme.example") || strings.Contains(r.Stdout, "logo.png") {
		t.Fatalf("update: exit %d\n%s\n%s", r.Code, r.Stdout, r.Stderr)
	}
	var again struct {
		PartnerID string       `json:"partner_id"`
		Changed   bool         `json:"changed"`
		Brand     domain.Brand `json:"brand"`
	}
	r = runCLI(t, append(offline(dir), "GIVING_DISPLAY_NAME=Acme Church Giving"), "partners", "update", "--partner", p.PartnerID, "--json")
	if err := json.Unmarshal([]byte(r.Stdout), &again); err != nil || r.Code != 0 || again.Changed || again.PartnerID != p.PartnerID || again.Brand.DisplayName != "Acme Church Giving" {
		t.Fatalf("the same name again: exit %d %v %+v\n%s", r.Code, err, again, r.Stderr)
	}

	// The running service shows what the operator set; a change made while
	// it runs reaches it over NATS and shows on the next page.
	srv := startServer(t, dir, nil)
	waitStatus(t, srv.URL, p.APIKey, http.StatusOK)
	c := &apitest.Client{TB: t, Base: srv.URL, Key: p.APIKey}
	s := openSession(t, c, importChurch(t, c, "Grace Chapel"), "+12025550100", "pct", "3", "https://partner.example/done")
	d := newDonorBrowser(t, s.URL, nil)
	if p := d.open(""); !strings.Contains(p.Body, `<span class="partner">Acme Church Giving</span>`) || strings.Contains(p.Body, "<img") ||
		!strings.Contains(p.Body, `<a href="https://acme.example/help" rel="noreferrer">`) || !strings.Contains(p.Body, `<a href="https://acme.example/terms" rel="noreferrer">`) {
		t.Fatalf("flow page after the offline changes:\n%s", p.Body)
	}
	r = runCLI(t, []string{"GIVING_DATA=" + dir}, "partners", "update", "--partner", p.PartnerID, "--logo-url", "https://cdn.acme.example/logo.png")
	if r.Code != 0 || !strings.Contains(r.Stderr, "via running instance") {
		t.Fatalf("update online: exit %d\n%s\n%s", r.Code, r.Stdout, r.Stderr)
	}
	waitFor(t, 10*time.Second, "the logo on the page", func() bool {
		p := d.open("")
		return strings.Contains(p.Body, `<img class="logo" src="https://cdn.acme.example/logo.png" alt="Acme Church Giving logo"`) &&
			strings.Contains(p.Header.Get("Content-Security-Policy"), "img-src 'self' https://cdn.acme.example;")
	})
}
