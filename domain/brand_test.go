package domain_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/partnergiving/giving/domain"
)

// graceTerms is a consent naming a church and a partner with a support
// contact.
var graceTerms = domain.ConsentTerms{Church: "Grace", Partner: "Acme Giving", Support: "help@acme.example"}

func TestBrandValidation(t *testing.T) {
	full := domain.Brand{
		DisplayName: "Acme Giving", LogoURL: "https://cdn.acme.example/logo.png",
		SupportEmail: "help@acme.example", PrivacyURL: "https://acme.example/privacy", TermsURL: "https://acme.example/terms",
	}
	with := func(change func(b *domain.Brand)) domain.Brand {
		b := full
		change(&b)
		return b
	}
	tests := []struct {
		name   string
		env    domain.Environment
		brand  domain.Brand
		fields []string // the fields refused, in order; nil: accepted
	}{
		{"complete", domain.Production, full, nil},
		{"none on the sandbox", domain.Sandbox, domain.Brand{}, nil},
		{"none on production", domain.Production, domain.Brand{}, []string{"support_url", "privacy_url", "terms_url"}},
		{"a support page instead of an email", domain.Production, with(func(b *domain.Brand) { b.SupportEmail, b.SupportURL = "", "https://acme.example/help" }), nil},
		{"no support on production", domain.Production, with(func(b *domain.Brand) { b.SupportEmail = "" }), []string{"support_url"}},
		{"no support on the sandbox", domain.Sandbox, with(func(b *domain.Brand) { b.SupportEmail = "" }), nil},
		{"both support contacts", domain.Sandbox, with(func(b *domain.Brand) { b.SupportURL = "https://acme.example/help" }), []string{"support_email"}},
		{"display name too long", domain.Sandbox, with(func(b *domain.Brand) { b.DisplayName = strings.Repeat("é", domain.MaxDisplayName+1) }), []string{"display_name"}},
		{"display name of the longest", domain.Sandbox, with(func(b *domain.Brand) { b.DisplayName = strings.Repeat("é", domain.MaxDisplayName) }), nil},
		{"display name with a control character", domain.Sandbox, with(func(b *domain.Brand) { b.DisplayName = "Acme\nGiving" }), []string{"display_name"}},
		{"http logo", domain.Sandbox, with(func(b *domain.Brand) { b.LogoURL = "http://cdn.acme.example/logo.png" }), []string{"logo_url"}},
		{"logo without a scheme", domain.Sandbox, with(func(b *domain.Brand) { b.LogoURL = "cdn.acme.example/logo.png" }), []string{"logo_url"}},
		{"data logo", domain.Sandbox, with(func(b *domain.Brand) { b.LogoURL = "data:image/png;base64,AAAA" }), []string{"logo_url"}},
		{"logo with user info", domain.Sandbox, with(func(b *domain.Brand) { b.LogoURL = "https://me:pw@cdn.acme.example/logo.png" }), []string{"logo_url"}},
		{"logo on an IPv6 host", domain.Sandbox, with(func(b *domain.Brand) { b.LogoURL = "https://[::1]/logo.png" }), []string{"logo_url"}},
		{"logo host a policy could be broken by", domain.Sandbox, with(func(b *domain.Brand) { b.LogoURL = "https://a.example;script-src/logo.png" }), []string{"logo_url"}},
		{"logo on a bad port", domain.Sandbox, with(func(b *domain.Brand) { b.LogoURL = "https://cdn.acme.example:0/logo.png" }), []string{"logo_url"}},
		{"logo on a port and an IPv4 host", domain.Sandbox, with(func(b *domain.Brand) { b.LogoURL = "https://127.0.0.1:8443/logo.png" }), nil},
		{"logo URL too long", domain.Sandbox, with(func(b *domain.Brand) {
			b.LogoURL = "https://cdn.acme.example/" + strings.Repeat("a", domain.MaxBrandURL)
		}), []string{"logo_url"}},
		{"javascript privacy", domain.Sandbox, with(func(b *domain.Brand) { b.PrivacyURL = "javascript:alert(1)" }), []string{"privacy_url"}},
		{"http terms", domain.Sandbox, with(func(b *domain.Brand) { b.TermsURL = "http://acme.example/terms" }), []string{"terms_url"}},
		{"http support page", domain.Sandbox, with(func(b *domain.Brand) { b.SupportEmail, b.SupportURL = "", "http://acme.example/help" }), []string{"support_url"}},
		{"email with a name", domain.Sandbox, with(func(b *domain.Brand) { b.SupportEmail = "Acme <help@acme.example>" }), []string{"support_email"}},
		{"email without a domain", domain.Sandbox, with(func(b *domain.Brand) { b.SupportEmail = "help@localhost" }), []string{"support_email"}},
		{"not an email", domain.Sandbox, with(func(b *domain.Brand) { b.SupportEmail = "help" }), []string{"support_email"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var p domain.Partner
			_, err := domain.CreatePartner(&p, domain.NewID(domain.PrefixPartner), "Acme", tt.env, nil, tt.brand, time.Now())
			var got []string
			if de, ok := err.(*domain.Error); ok {
				for _, f := range de.Fields {
					got = append(got, f.Field)
				}
			} else if err != nil {
				t.Fatalf("error %v is not a validation error", err)
			}
			if strings.Join(got, " ") != strings.Join(tt.fields, " ") {
				t.Fatalf("refused %v, want %v (%v)", got, tt.fields, err)
			}
		})
	}
}

// A brand is stored in canonical form: trimmed, hosts in lowercase.
func TestBrandIsStoredCanonical(t *testing.T) {
	var p domain.Partner
	ev, err := domain.CreatePartner(&p, domain.NewID(domain.PrefixPartner), "Acme", domain.Sandbox, nil, domain.Brand{
		DisplayName: "  Acme Giving ", LogoURL: " https://CDN.Acme.Example:443/Logo.png", SupportEmail: " help@acme.example ",
	}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	p.Apply(ev)
	want := domain.Brand{DisplayName: "Acme Giving", LogoURL: "https://cdn.acme.example:443/Logo.png", SupportEmail: "help@acme.example"}
	if p.Brand != want {
		t.Fatalf("brand %+v, want %+v", p.Brand, want)
	}
	if got := p.Brand.LogoOrigin(); got != "https://cdn.acme.example" {
		t.Fatalf("logo origin %q", got)
	}
}

func TestChangeBrand(t *testing.T) {
	now := time.Now()
	s := func(v string) *string { return &v }
	var p domain.Partner
	if _, err := domain.ChangeBrand(&p, domain.BrandChange{DisplayName: s("Acme")}, now); domain.ErrorKind(err) != domain.KindNotFound {
		t.Fatalf("change of a missing partner: %v", err)
	}
	created, err := domain.CreatePartner(&p, domain.NewID(domain.PrefixPartner), "Acme Church Software", domain.Production, nil, domain.Brand{
		SupportEmail: "help@acme.example", PrivacyURL: "https://acme.example/privacy", TermsURL: "https://acme.example/terms",
	}, now)
	if err != nil {
		t.Fatal(err)
	}
	p.Apply(created)
	if got := p.Brand.DisplayNameOr(p.Name); got != "Acme Church Software" {
		t.Fatalf("display name without one: %q", got)
	}
	tests := []struct {
		name    string
		change  domain.BrandChange
		want    domain.Brand // after the change
		invalid bool
	}{
		{"a display name and a logo", domain.BrandChange{DisplayName: s("Acme Giving"), LogoURL: s("https://cdn.acme.example/logo.svg")},
			domain.Brand{DisplayName: "Acme Giving", LogoURL: "https://cdn.acme.example/logo.svg", SupportEmail: "help@acme.example", PrivacyURL: "https://acme.example/privacy", TermsURL: "https://acme.example/terms"}, false},
		{"a support page replaces the email", domain.BrandChange{SupportURL: s("https://acme.example/help")},
			domain.Brand{DisplayName: "Acme Giving", LogoURL: "https://cdn.acme.example/logo.svg", SupportURL: "https://acme.example/help", PrivacyURL: "https://acme.example/privacy", TermsURL: "https://acme.example/terms"}, false},
		{"a support email replaces the page", domain.BrandChange{SupportEmail: s("giving@acme.example")},
			domain.Brand{DisplayName: "Acme Giving", LogoURL: "https://cdn.acme.example/logo.svg", SupportEmail: "giving@acme.example", PrivacyURL: "https://acme.example/privacy", TermsURL: "https://acme.example/terms"}, false},
		{"clearing the logo", domain.BrandChange{LogoURL: s("")},
			domain.Brand{DisplayName: "Acme Giving", SupportEmail: "giving@acme.example", PrivacyURL: "https://acme.example/privacy", TermsURL: "https://acme.example/terms"}, false},
		{"clearing the support contact on production", domain.BrandChange{SupportEmail: s("")}, domain.Brand{}, true},
		{"clearing the terms on production", domain.BrandChange{TermsURL: s("")}, domain.Brand{}, true},
		{"both support contacts at once", domain.BrandChange{SupportEmail: s("a@acme.example"), SupportURL: s("https://acme.example/help")}, domain.Brand{}, true},
		{"an http logo", domain.BrandChange{LogoURL: s("http://cdn.acme.example/logo.svg")}, domain.Brand{}, true},
	}
	for _, tt := range tests {
		before := p.Brand
		ev, err := domain.ChangeBrand(&p, tt.change, now)
		if tt.invalid {
			if domain.ErrorKind(err) != domain.KindInvalid || ev != nil {
				t.Fatalf("%s: %v %+v", tt.name, err, ev)
			}
			if p.Brand != before {
				t.Fatalf("%s: the refusal changed the partner", tt.name)
			}
			continue
		}
		if err != nil || ev == nil {
			t.Fatalf("%s: %v %+v", tt.name, err, ev)
		}
		if spec, _ := domain.EventTypeSpec(ev.Type); ev.Type != "partner.brand_changed" || spec.Public || ev.PartnerID != p.ID || ev.AggregateID != p.ID {
			t.Fatalf("%s: event %+v", tt.name, ev)
		}
		p.Apply(*ev)
		if p.Brand != tt.want {
			t.Fatalf("%s: brand %+v, want %+v", tt.name, p.Brand, tt.want)
		}
	}
	// The same brand again changes nothing.
	if ev, err := domain.ChangeBrand(&p, domain.BrandChange{DisplayName: s(" Acme Giving ")}, now); err != nil || ev != nil {
		t.Fatalf("unchanged: %v %+v", err, ev)
	}
}

// The consent names the partner as donors know it, and tells them how to
// stop giving in their words; the partner is never "the partner".
func TestConsentTextNamesThePartner(t *testing.T) {
	g := domain.Giving{Mode: domain.ModePercent, Value: 300}
	tests := []struct {
		terms domain.ConsentTerms
		want  string
	}{
		{graceTerms, "I authorize my employer's payroll provider to deduct 3% of each paycheck and send it to Grace until I stop giving. " +
			"I can stop giving at any time by contacting Acme Giving support at help@acme.example. Consent version " + domain.ConsentVersion + "."},
		{domain.Brand{DisplayName: "Acme Giving", SupportURL: "https://acme.example/help"}.ConsentTerms("Grace"), "I authorize my employer's payroll provider to deduct 3% of each paycheck and send it to Grace until I stop giving. " +
			"I can stop giving at any time by contacting Acme Giving support at https://acme.example/help. Consent version " + domain.ConsentVersion + "."},
		{domain.ConsentTerms{Church: "Grace", Partner: "Acme"}, "I authorize my employer's payroll provider to deduct 3% of each paycheck and send it to Grace until I stop giving. " +
			"I can stop giving at any time by contacting Acme. Consent version " + domain.ConsentVersion + "."},
	}
	for _, tt := range tests {
		got := domain.ConsentText(tt.terms, g)
		if got != tt.want {
			t.Errorf("ConsentText(%+v) =\n%q, want\n%q", tt.terms, got, tt.want)
		}
		if strings.Contains(got, "partner") || strings.Contains(got, "cancel") {
			t.Errorf("consent text uses words donors do not: %q", got)
		}
	}
}

// A consent is recorded only to the text the donor's form showed: a form
// that showed another text (the partner's brand changed meanwhile) is
// refused, and one that names no text is taken at the current one.
func TestConsentToTheTextShown(t *testing.T) {
	now := time.Now()
	open := func() *domain.Session {
		var s domain.Session
		created, err := domain.CreateSession(&s, domain.NewSession{ID: domain.NewID(domain.PrefixSession), PartnerID: "pt_a", ChurchID: "ch_1",
			Giving: domain.Giving{Mode: domain.ModePercent, Value: 300}}, now)
		if err != nil {
			t.Fatal(err)
		}
		s.Apply(created)
		step(t, &s, func(s *domain.Session) (*domain.Event, error) { return domain.SendCode(s, now) })
		step(t, &s, func(s *domain.Session) (*domain.Event, error) { return domain.CheckCode(s, true, now) })
		return &s
	}
	shown := domain.ConsentDigest(domain.ConsentText(graceTerms, domain.Giving{Mode: domain.ModePercent, Value: 300}))
	renamed := graceTerms
	renamed.Partner = "Acme Church Giving"
	for _, tt := range []struct {
		name  string
		terms domain.ConsentTerms
		shown string
		err   error
	}{
		{"the text shown", graceTerms, shown, nil},
		{"no text named", renamed, "", nil},
		{"the partner renamed since", renamed, shown, domain.ErrTermsChanged},
		{"another amount's text", graceTerms, domain.ConsentDigest(domain.ConsentText(graceTerms, domain.Giving{Mode: domain.ModePercent, Value: 500})), domain.ErrTermsChanged},
	} {
		s := open()
		ev, err := domain.Consent(s, tt.terms, tt.shown, now)
		if !errors.Is(err, tt.err) {
			t.Fatalf("%s: %v, want %v", tt.name, err, tt.err)
		}
		if err == nil && ev.Payload.(*domain.ConsentGiven).Text != domain.ConsentText(tt.terms, s.Giving) {
			t.Fatalf("%s: recorded %+v", tt.name, ev.Payload)
		}
	}
}
