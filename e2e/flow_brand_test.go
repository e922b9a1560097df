package e2e

import (
	"bytes"
	"context"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/httpapi/apitest"
)

// termsDigest finds the digest of the consent text a consent page shows.
var termsDigest = regexp.MustCompile(`name="terms_digest" value="([0-9a-f]{32})"`)

// brandedPartner onboards a partner with a brand and returns a client
// acting as it, with its id.
func brandedPartner(t *testing.T, ts *testStack, name string, b domain.Brand) (*apitest.Client, string) {
	t.Helper()
	id, key, err := ts.Operators.CreatePartner(context.Background(), name, []string{"https://partner.example"}, b)
	if err != nil {
		t.Fatalf("create partner %s: %v", name, err)
	}
	ts.waitProjected(t)
	return &apitest.Client{TB: t, Base: ts.URL, Key: key.Secret}, id
}

var (
	acmeBrand = domain.Brand{
		DisplayName: "Acme Giving", LogoURL: "https://cdn.acme.example/brand/logo.png", SupportEmail: "help@acme.example",
		PrivacyURL: "https://acme.example/privacy", TermsURL: "https://acme.example/terms",
	}
	beaconBrand = domain.Brand{
		DisplayName: "Beacon Church Apps", LogoURL: "https://img.beacon.example:8443/b.svg", SupportURL: "https://beacon.example/help",
		PrivacyURL: "https://beacon.example/privacy", TermsURL: "https://beacon.example/terms",
	}
)

// brandMarks are the strings a partner's brand puts on a page; none of
// them may show on another partner's.
func brandMarks(b domain.Brand) []string {
	var out []string
	for _, s := range []string{b.DisplayName, b.LogoURL, b.SupportEmail, b.SupportURL, b.PrivacyURL, b.TermsURL, b.LogoOrigin()} {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}

// checkBrand fails unless the page shows the partner's brand and the
// church in its header and footer, loads the logo's origin alone besides
// its own (csp is the page's policy without the logo), and shows nothing
// of other.
func checkBrand(t *testing.T, p flowPage, b domain.Brand, church, csp string, other domain.Brand) {
	t.Helper()
	wants := []string{
		`<span class="partner">` + b.DisplayName + `</span>`,
		`Giving to <strong>` + church + `</strong>`,
		`<img class="logo" src="` + b.LogoURL + `" alt="` + b.DisplayName + ` logo"`,
		`<a href="` + b.PrivacyURL + `" rel="noreferrer">` + b.DisplayName + ` privacy policy</a>`,
		`<a href="` + b.TermsURL + `" rel="noreferrer">` + b.DisplayName + ` terms</a>`,
	}
	if b.SupportEmail != "" {
		wants = append(wants, `Help from `+b.DisplayName+`: <a href="mailto:`+b.SupportEmail+`">`+b.SupportEmail+`</a>`)
	} else {
		wants = append(wants, `Help from `+b.DisplayName+`: <a href="`+b.SupportURL+`" rel="noreferrer">`+b.SupportURL+`</a>`)
	}
	for _, want := range wants {
		if !strings.Contains(p.Body, want) {
			t.Errorf("%s %q lacks %s", p.URL, p.h1(), want)
		}
	}
	want := strings.Replace(csp, "img-src 'self'", "img-src 'self' "+b.LogoOrigin(), 1)
	if got := p.Header.Get("Content-Security-Policy"); got != want {
		t.Errorf("%s %q: CSP %q, want %q", p.URL, p.h1(), got, want)
	}
	for _, mark := range brandMarks(other) {
		if strings.Contains(p.Body, mark) || strings.Contains(p.Header.Get("Content-Security-Policy"), mark) {
			t.Errorf("%s %q shows another partner's %q", p.URL, p.h1(), mark)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
}

// Every page of the flow shows the partner as donors know it and the
// church, the logo (its origin alone allowed as an image source), and the
// partner's help, privacy and terms links; the consent names the partner
// and says how to stop giving; the done page gives a reference to quote.
// One partner's brand never shows on another's pages.
func TestFlowShowsThePartnersBrand(t *testing.T) {
	t.Parallel()
	ts := startStack(t)
	acme, _ := brandedPartner(t, ts, "Acme Church Software", acmeBrand)
	beacon, _ := brandedPartner(t, ts, "Beacon Software Inc.", beaconBrand)
	grace := importChurch(t, acme, "Grace Chapel")
	hope := importChurch(t, beacon, "Hope Fellowship")

	t.Run("each step", func(t *testing.T) {
		s := openSession(t, acme, grace, "+12025550100", "pct", "3", "https://partner.example/done")
		d := newDonorBrowser(t, s.URL, nil)
		p := d.open("")
		p.expect(t, http.StatusOK, "Confirm it's you")
		checkBrand(t, p, acmeBrand, "Grace Chapel", flowCSP, beaconBrand)
		d.submit("code", nil)
		p = d.submit("verify", url.Values{"code": {"000000"}})
		p.expect(t, http.StatusOK, "Agree to give")
		checkBrand(t, p, acmeBrand, "Grace Chapel", flowCSP, beaconBrand)
		text := "I authorize my employer's payroll provider to deduct 3% of each paycheck and send it to Grace Chapel until I stop giving. " +
			"I can stop giving at any time by contacting Acme Giving support at help@acme.example. Consent version " + domain.ConsentVersion + "."
		if !strings.Contains(p.Body, `<div class="terms" id="terms-text"><p>`+strings.ReplaceAll(text, "'", "&#39;")+`</p></div>`) {
			t.Fatalf("consent text, want %q:\n%s", text, p.Body)
		}
		if strings.Contains(p.Body, "through the partner") {
			t.Fatal("the consent still says the partner")
		}
		// A form shown under the earlier wording is refused: the donor
		// reads the terms again.
		p = d.submit("consent", url.Values{"version": {"2026-11-01"}, "gift": {"yes"}, "terms": {"yes"}})
		if p.h1() != "Agree to give" || !strings.Contains(p.Body, "The terms were updated. Please read them again.") {
			t.Fatalf("a consent to the earlier wording: %q\n%s", p.h1(), p.Body)
		}
		p = d.submit("consent", url.Values{"version": {domain.ConsentVersion}, "gift": {"yes"}, "terms": {"yes"}})
		checkBrand(t, p, acmeBrand, "Grace Chapel", flowCSP, beaconBrand)
		var consented *domain.ConsentGiven
		for _, ev := range ledgerEvents(t, ts.Ledger, "donor_session.consented") {
			if ev.AggregateID == s.ID {
				consented = ev.Payload.(*domain.ConsentGiven)
			}
		}
		if consented == nil || consented.Text != text || consented.Version != domain.ConsentVersion {
			t.Fatalf("the ledger records the consent %+v, want the text shown", consented)
		}
	})

	t.Run("the done page gives a reference", func(t *testing.T) {
		_, en, d := enrollByFlow(t, acme, grace, "pct", "3", nil)
		p := d.open("")
		p.expect(t, http.StatusOK, "You're all set")
		checkBrand(t, p, acmeBrand, "Grace Chapel", flowCSP, beaconBrand)
		if !strings.Contains(p.Body, `Your reference: <code class="reference" id="reference">`+en+`</code>`) ||
			!strings.Contains(p.Body, `To stop giving at any time, or for help with this gift, contact Acme Giving support at <a href="mailto:help@acme.example">help@acme.example</a> and quote this reference.`) {
			t.Fatalf("done page reference %s:\n%s", en, p.Body)
		}
		// The reference is what the partner holds: the enrollment's id.
		if got := getEnrollment(t, acme, en); got.EnrollmentID != en {
			t.Fatalf("the partner cannot find the reference: %+v", got)
		}
		// A raise's done page quotes the same reference.
		_, e := move(t, acme, en, "update", `{"value":5}`, http.StatusOK)
		rd := consentByFlow(t, e.ConsentURL, nil)
		checkBrand(t, rd.page, acmeBrand, "Grace Chapel", flowCSP, beaconBrand)
		if !strings.Contains(rd.page.Body, `id="reference">`+en+`</code>`) {
			t.Fatalf("raise's done page lacks the reference %s:\n%s", en, rd.page.Body)
		}
		// Canceled: the page for the link names the partner too.
		move(t, acme, en, "cancel", nil, http.StatusOK)
		p = d.open("")
		p.expect(t, http.StatusOK, "Your giving was canceled")
		checkBrand(t, p, acmeBrand, "Grace Chapel", flowCSP, beaconBrand)
	})

	t.Run("another partner's pages", func(t *testing.T) {
		s := openSession(t, beacon, hope, "+12025550123", "fixed", "10", "https://partner.example/done")
		d := newDonorBrowser(t, s.URL, nil)
		p := d.open("")
		checkBrand(t, p, beaconBrand, "Hope Fellowship", flowCSP, acmeBrand)
		d.submit("code", nil)
		p = d.submit("verify", url.Values{"code": {"000000"}})
		checkBrand(t, p, beaconBrand, "Hope Fellowship", flowCSP, acmeBrand)
		if !strings.Contains(p.Body, "by contacting Beacon Church Apps support at https://beacon.example/help.") {
			t.Fatalf("consent names the support page: %s", p.Body)
		}
		p = d.submit("consent", url.Values{"version": {domain.ConsentVersion}, "gift": {"yes"}, "terms": {"yes"}})
		p.expect(t, http.StatusOK, "Check your identity")
		checkBrand(t, p, beaconBrand, "Hope Fellowship", flowCSP, acmeBrand)
		// The identity-wait page runs its script: its own policy, with the
		// logo's origin.
		p = d.verifyIdentity("wait")
		p.expect(t, http.StatusOK, "Checking your identity")
		checkBrand(t, p, beaconBrand, "Hope Fellowship", flowWaitCSP, acmeBrand)
		// Another browser: the link-used page names the partner too.
		other := newDonorBrowser(t, s.URL, nil).open("")
		other.expect(t, http.StatusForbidden, "This link was already used")
		checkBrand(t, other, beaconBrand, "Hope Fellowship", flowCSP, acmeBrand)
	})

	t.Run("a page without a session names no partner", func(t *testing.T) {
		p := newDonorBrowser(t, ts.URL+"/flow/nope", nil).open("")
		p.expect(t, http.StatusNotFound, "We can't find this page")
		for _, b := range []domain.Brand{acmeBrand, beaconBrand} {
			for _, mark := range brandMarks(b) {
				if strings.Contains(p.Body, mark) {
					t.Fatalf("the not-found page shows %q", mark)
				}
			}
		}
		if got := p.Header.Get("Content-Security-Policy"); got != flowCSP {
			t.Fatalf("CSP %q", got)
		}
	})
}

// A partner onboarded without a brand (every partner before brands
// existed) keeps working: the flow names it by its partner name, shows no
// logo and no links, allows no other image source, and the consent tells
// the donor to contact it by that name.
func TestFlowWithoutABrand(t *testing.T) {
	t.Parallel()
	ts := startStack(t)
	c, _ := brandedPartner(t, ts, "Plain Church Software", domain.Brand{})
	church := importChurch(t, c, "Grace Chapel")
	s := openSession(t, c, church, "+12025550100", "pct", "3", "https://partner.example/done")
	d := newDonorBrowser(t, s.URL, nil)
	p := d.open("")
	checkFlowHeaders(t, p)
	if !strings.Contains(p.Body, `<span class="partner">Plain Church Software</span>`) || strings.Contains(p.Body, "<img") || strings.Contains(p.Body, `aria-label="Help and policies"`) {
		t.Fatalf("a partner without a brand:\n%s", p.Body)
	}
	d.submit("code", nil)
	p = d.submit("verify", url.Values{"code": {"000000"}})
	checkFlowHeaders(t, p)
	if !strings.Contains(p.Body, "I can stop giving at any time by contacting Plain Church Software. Consent version") {
		t.Fatalf("consent without a support contact:\n%s", p.Body)
	}
	_, en, done := enrollByFlow(t, c, church, "pct", "3", nil)
	if p = done.page; !strings.Contains(p.Body, `id="reference">`+en+`</code>`) || !strings.Contains(p.Body, "contact Plain Church Software and quote this reference.") {
		t.Fatalf("done page without a support contact:\n%s", p.Body)
	}
}

// An operator's change of the brand (partner.brand_changed) shows on the
// partner's next page, and never on its feed: it is an internal event. A
// consent form shown before the change is refused.
func TestBrandChangeShowsOnTheNextPage(t *testing.T) {
	t.Parallel()
	ts := startStack(t)
	c, pid := brandedPartner(t, ts, "Acme Church Software", acmeBrand)
	church := importChurch(t, c, "Grace Chapel")
	s := openSession(t, c, church, "+12025550100", "pct", "3", "https://partner.example/done")
	d := newDonorBrowser(t, s.URL, nil)
	checkBrand(t, d.open(""), acmeBrand, "Grace Chapel", flowCSP, beaconBrand)

	name, none, page := "Acme Church Giving", "", "https://acme.example/giving-help"
	after, changed, err := ts.Operators.ChangeBrand(context.Background(), pid, domain.BrandChange{DisplayName: &name, LogoURL: &none, SupportURL: &page})
	if err != nil || !changed {
		t.Fatalf("change brand: %v %v", changed, err)
	}
	want := domain.Brand{DisplayName: name, SupportURL: page, PrivacyURL: acmeBrand.PrivacyURL, TermsURL: acmeBrand.TermsURL}
	if after != want {
		t.Fatalf("brand after the change %+v, want %+v", after, want)
	}
	ts.waitProjected(t)
	p := d.open("")
	checkFlowHeaders(t, p) // no logo: no other image source
	if !strings.Contains(p.Body, `<span class="partner">Acme Church Giving</span>`) || strings.Contains(p.Body, "<img") ||
		!strings.Contains(p.Body, `Help from Acme Church Giving: <a href="`+page+`" rel="noreferrer">`) || strings.Contains(p.Body, "help@acme.example") {
		t.Fatalf("after the change:\n%s", p.Body)
	}
	if _, changed, err := ts.Operators.ChangeBrand(context.Background(), pid, domain.BrandChange{DisplayName: &name}); err != nil || changed {
		t.Fatalf("the same brand again: %v %v", changed, err)
	}

	// A donor who read the consent before a change agrees to nothing: the
	// consent is recorded only to the text the page showed.
	d.submit("code", nil)
	p = d.submit("verify", url.Values{"code": {"000000"}})
	p.expect(t, http.StatusOK, "Agree to give")
	shown := termsDigest.FindStringSubmatch(p.Body)
	if shown == nil || !strings.Contains(p.Body, "contacting Acme Church Giving support at "+page) {
		t.Fatalf("consent page:\n%s", p.Body)
	}
	renamed := "Acme Giving Online"
	if _, _, err := ts.Operators.ChangeBrand(context.Background(), pid, domain.BrandChange{DisplayName: &renamed}); err != nil {
		t.Fatal(err)
	}
	ts.waitProjected(t)
	consent := url.Values{"version": {domain.ConsentVersion}, "terms_digest": {shown[1]}, "gift": {"yes"}, "terms": {"yes"}}
	p = d.submit("consent", consent)
	if p.h1() != "Agree to give" || !strings.Contains(p.Body, "The terms were updated. Please read them again.") || !strings.Contains(p.Body, "contacting Acme Giving Online support") {
		t.Fatalf("a consent to the text before the change: %q\n%s", p.h1(), p.Body)
	}
	consent.Set("terms_digest", termsDigest.FindStringSubmatch(p.Body)[1])
	d.submit("consent", consent).expect(t, http.StatusOK, "Connect your payroll")
	consented := ledgerEvents(t, ts.Ledger, "donor_session.consented")
	if len(consented) != 1 || !strings.Contains(consented[0].Payload.(*domain.ConsentGiven).Text, "contacting Acme Giving Online support at "+page) {
		t.Fatalf("consents recorded: %+v", consented)
	}
	if n := len(ledgerEvents(t, ts.Ledger, "partner.brand_changed")); n != 2 {
		t.Fatalf("%d partner.brand_changed in the ledger, want 2: the same brand again records nothing", n)
	}
	for _, raw := range getEvents(t, c, url.Values{}).Data {
		if e := decodeEnvelope(t, raw); strings.HasPrefix(e.EventType, "partner.") {
			t.Fatalf("the feed shows %s", e.EventType)
		}
	}
}

// In a real browser the partner's logo, served over https from its own
// origin, loads under the page's policy, which blocks any other image
// source; its request carries no referrer, so the url's token never leaves
// the page.
func TestFlowLogoLoadsInBrowser(t *testing.T) {
	t.Parallel()
	var logo bytes.Buffer
	img := image.NewRGBA(image.Rect(0, 0, 40, 40))
	draw.Draw(img, img.Bounds(), &image.Uniform{C: color.RGBA{R: 200, A: 255}}, image.Point{}, draw.Src)
	if err := png.Encode(&logo, img); err != nil {
		t.Fatal(err)
	}
	var (
		mu       sync.Mutex
		requests []*http.Request
	)
	cdn := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		requests = append(requests, r.Clone(context.Background()))
		mu.Unlock()
		w.Header().Set("Content-Type", "image/png")
		_, _ = w.Write(logo.Bytes())
	}))
	t.Cleanup(cdn.Close)
	// The test's certificate is its own: the browser is told to accept it.
	b := newBrowser(t, chromedp.Flag("ignore-certificate-errors", true))

	ts := startStack(t)
	brand := acmeBrand
	brand.LogoURL = cdn.URL + "/brand/logo.png"
	c, _ := brandedPartner(t, ts, "Acme Church Software", brand)
	s := openSession(t, c, importChurch(t, c, "Grace Chapel"), "+12025550100", "pct", "3", "https://partner.example/done")
	tb := b.tab(t)
	tb.open(s.URL, "Confirm it's you")
	waitFor(t, 10*time.Second, "the logo to load", func() bool {
		return tb.text(`String(document.querySelector("img.logo").complete && document.querySelector("img.logo").naturalWidth)`) == "40"
	})
	if alt := tb.text(`document.querySelector("img.logo").alt`); alt != "Acme Giving logo" {
		t.Fatalf("logo alt %q", alt)
	}
	// An image from anywhere else is refused by the page's policy.
	tb.text(`(function () { var i = new Image(); i.id = "stray"; i.src = "https://cdn.elsewhere.example/x.png"; document.body.appendChild(i); return ""; })()`)
	waitFor(t, 10*time.Second, "the policy to refuse another image source", func() bool {
		for _, m := range tb.messages() {
			if strings.Contains(m, "cdn.elsewhere.example") && strings.Contains(m, "Content Security Policy") {
				return true
			}
		}
		return false
	})
	mu.Lock()
	defer mu.Unlock()
	token := strings.TrimPrefix(s.URL, ts.URL+"/flow/")
	for _, r := range requests {
		if r.Header.Get("Referer") != "" || strings.Contains(r.URL.String(), token) {
			t.Fatalf("the logo's request gave away the page: %s %v", r.URL, r.Header)
		}
	}
	if len(requests) == 0 {
		t.Fatal("the logo was never requested")
	}
}
