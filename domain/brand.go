package domain

import (
	"net/mail"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Brand is what a donor sees of a partner in the hosted flow: the name the
// donor knows it by, its logo, where to get help (a support page or an
// email address, one of them), and its privacy and terms pages. Partners
// onboarded before brands existed have none; the flow then shows the
// partner's name and leaves out what is missing. On production, a partner
// needs a support contact and its privacy and terms pages: the consent
// tells a donor to contact that support to stop giving, and a live donor
// must be able to read the policies of the one they give through.
type Brand struct {
	DisplayName  string `json:"display_name,omitempty"`
	LogoURL      string `json:"logo_url,omitempty"`
	SupportURL   string `json:"support_url,omitempty"`
	SupportEmail string `json:"support_email,omitempty"`
	PrivacyURL   string `json:"privacy_url,omitempty"`
	TermsURL     string `json:"terms_url,omitempty"`
}

// BrandChange is an operator's change to a brand: a nil field stays as it
// is, an empty one is cleared. A support URL replaces a support email and
// the other way round, since donors are given one place to ask.
type BrandChange struct {
	DisplayName  *string
	LogoURL      *string
	SupportURL   *string
	SupportEmail *string
	PrivacyURL   *string
	TermsURL     *string
}

// PartnerBrandChanged records an operator's change of the partner's brand:
// the whole brand as it is from then on.
type PartnerBrandChanged struct {
	Brand Brand `json:"brand"`
}

func (*PartnerBrandChanged) EventType() string { return "partner.brand_changed" }

func init() {
	register[PartnerBrandChanged](false, "An operator changed what donors see of the partner: its display name, logo, support contact, privacy and terms pages.")
}

// Brand limits.
const (
	MaxDisplayName = 100
	MaxBrandURL    = 2048
)

// With returns the brand with the change made.
func (b Brand) With(c BrandChange) Brand {
	set := func(to, from *string) {
		if from != nil {
			*to = *from
		}
	}
	set(&b.DisplayName, c.DisplayName)
	set(&b.LogoURL, c.LogoURL)
	set(&b.SupportURL, c.SupportURL)
	set(&b.SupportEmail, c.SupportEmail)
	set(&b.PrivacyURL, c.PrivacyURL)
	set(&b.TermsURL, c.TermsURL)
	if c.SupportURL != nil && *c.SupportURL != "" && c.SupportEmail == nil {
		b.SupportEmail = ""
	}
	if c.SupportEmail != nil && *c.SupportEmail != "" && c.SupportURL == nil {
		b.SupportURL = ""
	}
	return b
}

// normalized checks the brand for a partner on env, recording each problem
// in v, and returns it in canonical form: trimmed, hosts in lowercase.
func (b Brand) normalized(env Environment, v *Validation) Brand {
	b.DisplayName = strings.TrimSpace(b.DisplayName)
	if n := utf8.RuneCountInString(b.DisplayName); n > MaxDisplayName || strings.ContainsFunc(b.DisplayName, unicode.IsControl) {
		v.Add("display_name", "must be at most %d characters, without control characters", MaxDisplayName)
	}
	for _, f := range []struct {
		field string
		value *string
	}{
		{"logo_url", &b.LogoURL}, {"support_url", &b.SupportURL}, {"privacy_url", &b.PrivacyURL}, {"terms_url", &b.TermsURL},
	} {
		u, err := brandURL(*f.value)
		if err != nil {
			v.Add(f.field, "%s", err.(*Error).Detail)
		}
		*f.value = u
	}
	b.SupportEmail = strings.TrimSpace(b.SupportEmail)
	if b.SupportEmail != "" && !validEmail(b.SupportEmail) {
		v.Add("support_email", "must be an email address such as help@example.org")
	}
	if b.SupportURL != "" && b.SupportEmail != "" {
		v.Add("support_email", "give a support URL or a support email, not both")
	}
	if env == Production {
		b.requireOnProduction(v)
	}
	return b
}

// requireOnProduction records what a production partner's brand lacks.
func (b Brand) requireOnProduction(v *Validation) {
	if b.SupportURL == "" && b.SupportEmail == "" {
		v.Add("support_url", "a production partner needs a support URL or a support email: the consent tells donors to contact it to stop giving")
	}
	if b.PrivacyURL == "" {
		v.Add("privacy_url", "a production partner needs a privacy page")
	}
	if b.TermsURL == "" {
		v.Add("terms_url", "a production partner needs a terms page")
	}
}

// hostName is a DNS name or an IPv4 address, in lowercase: what a
// Content-Security-Policy source can name (it has no form for IPv6).
var hostName = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$`)

// brandURL checks an https address of a brand ("" stays "") and returns it
// in canonical form.
func brandURL(s string) (string, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return "", nil
	}
	u, err := url.Parse(s)
	if err != nil || u.Scheme != "https" || u.Opaque != "" || u.User != nil || len(s) > MaxBrandURL {
		return s, ProblemValidation.New("must be an https URL of at most %d characters, such as https://example.org/privacy", MaxBrandURL)
	}
	u.Host = strings.ToLower(u.Host)
	if !hostName.MatchString(u.Hostname()) {
		return s, ProblemValidation.New("must name its host by a DNS name or an IPv4 address")
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return s, ProblemValidation.New("port must be 1 to 65535")
		}
	}
	return u.String(), nil
}

// validEmail accepts a bare address (no display name) whose domain is a
// host name with a dot.
func validEmail(s string) bool {
	a, err := mail.ParseAddress(s)
	if err != nil || a.Address != s || len(s) > 254 {
		return false
	}
	at := strings.LastIndexByte(s, '@')
	domain := strings.ToLower(s[at+1:])
	return strings.Contains(domain, ".") && hostName.MatchString(domain)
}

// DisplayNameOr is the name donors know the partner by: the display name,
// or fallback (the partner's name) when it has none.
func (b Brand) DisplayNameOr(fallback string) string {
	if b.DisplayName != "" {
		return b.DisplayName
	}
	return fallback
}

// Support is where a donor asks for help: the support email or page, ""
// for none.
func (b Brand) Support() string {
	if b.SupportEmail != "" {
		return b.SupportEmail
	}
	return b.SupportURL
}

// ConsentTerms is who a consent to give to church names: the partner by
// the brand's display name (set it with DisplayNameOr first), and its
// support contact.
func (b Brand) ConsentTerms(church string) ConsentTerms {
	return ConsentTerms{Church: church, Partner: b.DisplayName, Support: b.Support()}
}

// LogoOrigin is the origin the logo loads from ("" without a logo): the
// one image source a flow page allows besides its own.
func (b Brand) LogoOrigin() string {
	u, err := url.Parse(b.LogoURL)
	if b.LogoURL == "" || err != nil {
		return ""
	}
	return OriginOf(u)
}

// ChangeBrand decides an operator's change of the partner's brand. It
// returns a nil event when the brand stays as it is.
func ChangeBrand(p *Partner, c BrandChange, now time.Time) (*Event, error) {
	if !p.Exists() {
		return nil, NotFound("partner", p.ID)
	}
	var v Validation
	next := p.Brand.With(c).normalized(p.Environment, &v)
	if err := v.Err(); err != nil {
		return nil, err
	}
	if next == p.Brand {
		return nil, nil
	}
	ev := NewEvent(p.ID, p.ID, "", now, &PartnerBrandChanged{Brand: next})
	return &ev, nil
}
