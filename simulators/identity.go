package simulators

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/vendors/stripeidentity"
)

// IdentityStandin is the sandbox's identity vendor: a stand-in for Stripe
// Identity's hosted verification, built into the service. Its page (served
// by the service at StandinPath, outside the flow's own pages) lets the
// donor choose how the verification ends; the choice is sent as the webhook
// Stripe would send, signed with the sandbox's identity secret, through the
// production edge, before the donor goes back to the flow.
//
// It keeps no state, so that any instance serves any of its pages: the
// page's token seals the donor, church, session and return URL with a key
// of the service's own. For the same reason it cannot tell a donor who left
// its page from one who submitted: CheckIdentity always answers that the
// verification is being checked, so a donor who comes back without
// choosing waits until POST /sandbox/simulate/kyc decides.
type IdentityStandin struct {
	sim    *Simulator
	sealer Sealer
	base   string
	origin string
}

// Sealer seals the stand-in's page tokens (secrets.Sealer).
type Sealer interface {
	Seal(plaintext, aad []byte) []byte
	Open(sealed, aad []byte) ([]byte, error)
}

// StandinPath is where the service serves the stand-in's page, followed by
// the page's token. It needs no API key: like Stripe's page, the token is
// the donor's alone.
const StandinPath = "/standin/stripe/identity/"

// standinAAD binds the tokens to their purpose.
var standinAAD = []byte("sandbox identity stand-in")

// NewIdentityStandin returns the stand-in, sending its webhooks with sim
// and serving its page under publicURL.
func NewIdentityStandin(sim *Simulator, publicURL string, sealer Sealer) (*IdentityStandin, error) {
	u, err := url.Parse(publicURL)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("identity stand-in: public URL %q is not absolute", publicURL)
	}
	return &IdentityStandin{sim: sim, sealer: sealer, base: strings.TrimRight(publicURL, "/"), origin: u.Scheme + "://" + u.Host}, nil
}

// standinTicket is what a page token seals.
type standinTicket struct {
	Church  string `json:"c"`
	Donor   string `json:"d"`
	Session string `json:"s"`
	Return  string `json:"r"`
}

// StartIdentity issues a page for the donor.
func (st *IdentityStandin) StartIdentity(_ context.Context, r domain.IdentityRequest) (domain.IdentityCheck, error) {
	raw, err := json.Marshal(standinTicket{Church: r.ChurchID, Donor: r.DonorID, Session: r.SessionID, Return: r.ReturnURL})
	if err != nil {
		return domain.IdentityCheck{}, err
	}
	token := base64.RawURLEncoding.EncodeToString(st.sealer.Seal(raw, standinAAD))
	return domain.IdentityCheck{ID: verificationID(token), URL: st.base + StandinPath + token, Open: true}, nil
}

// CheckIdentity answers that the verification is being checked: the
// stand-in keeps nothing to know better by.
func (st *IdentityStandin) CheckIdentity(_ context.Context, id string) (domain.IdentityCheck, error) {
	return domain.IdentityCheck{ID: id}, nil
}

// CancelIdentity has nothing to cancel: a page of an expired session still
// opens, and the edge refuses what it sends.
func (st *IdentityStandin) CancelIdentity(context.Context, string) error { return nil }

// PageOrigin is the service's own origin, which serves the page.
func (st *IdentityStandin) PageOrigin() string { return st.origin }

// verificationID is the Stripe-like id (vs_...) of the verification a token
// opens.
func verificationID(token string) string {
	sum := sha256.Sum256([]byte(token))
	return "vs_" + hex.EncodeToString(sum[:12])
}

// StandinChoices are what the stand-in's page offers the donor: each
// outcome the identity step knows, and "wait", which submits and leaves the
// decision to POST /sandbox/simulate/kyc (Stripe's processing event, which
// decides nothing).
var StandinChoices = append(slices.Clone(kycOutcomes), StandinWait)

// StandinWait is the choice that decides nothing yet.
const StandinWait = "wait"

// Why the stand-in's page refuses a request.
var (
	// ErrStandinToken means a page token the stand-in did not issue.
	ErrStandinToken = errors.New("not a page of the identity stand-in")
	// ErrStandinChoice means a choice the page does not offer.
	ErrStandinChoice = errors.New("not a choice of the identity stand-in's page")
)

// OpenStandin checks a page token.
func (st *IdentityStandin) OpenStandin(token string) error {
	_, err := st.ticket(token)
	return err
}

func (st *IdentityStandin) ticket(token string) (standinTicket, error) {
	var t standinTicket
	sealed, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil {
		return t, ErrStandinToken
	}
	raw, err := st.sealer.Open(sealed, standinAAD)
	if err != nil || json.Unmarshal(raw, &t) != nil {
		return t, ErrStandinToken
	}
	return t, nil
}

// DecideStandin ends the page of token as the donor chose: it sends the
// webhook Stripe would, and returns where to send the donor back to and the
// edge's answer. Other than ErrStandinToken and ErrStandinChoice, an error
// means the edge could not be reached.
func (st *IdentityStandin) DecideStandin(ctx context.Context, token, choice string) (string, Answer, error) {
	t, err := st.ticket(token)
	if err != nil {
		return "", Answer{}, err
	}
	p := stripeidentity.EventParams{
		SessionID: verificationID(token),
		Metadata:  map[string]string{stripeidentity.ReferenceKey: t.Donor, stripeidentity.ChurchKey: t.Church, stripeidentity.SessionKey: t.Session},
	}
	switch {
	case choice == StandinWait:
		p.Type = stripeidentity.EventProcessing
	case slices.Contains(kycOutcomes, choice):
		p.Type, p.LastError, err = stripeidentity.OutcomeEvent(stripeidentity.Outcome(choice))
		if err != nil {
			return "", Answer{}, err
		}
	default:
		return "", Answer{}, ErrStandinChoice
	}
	answer, err := st.sim.identityEvent(ctx, p)
	return t.Return, answer, err
}
