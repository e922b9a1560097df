package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog"
	"github.com/partnergiving/giving/eventlog/control"
	"github.com/partnergiving/giving/eventlog/vault"
	"github.com/partnergiving/giving/projections"
	"github.com/partnergiving/giving/secrets"
)

// Operators are the operator's use cases: onboarding partners, managing
// their keys, erasing a donor's phone. They need only the ledger, loading
// each aggregate from it, so they work the same whether an instance is
// running (reached over NATS) or not (the CLI opens the data directory); a
// running instance is asked what its projections know where that spares a
// read of the ledger's history (sessionsOfDonor).
type Operators struct {
	ledger  *eventlog.Ledger
	control *control.Plane
}

// NewOperators returns the operator use cases on ledger.
func NewOperators(l *eventlog.Ledger) *Operators {
	return &Operators{ledger: l, control: control.New(l)}
}

// CreatePartner onboards a partner, with what donors see of it, and issues
// its first key.
func (o *Operators) CreatePartner(ctx context.Context, name string, origins []string, brand domain.Brand) (string, domain.NewKey, error) {
	id := domain.NewID(domain.PrefixPartner)
	_, err := o.ledger.Execute(ctx, eventlog.Command{
		Partner: id, Aggregate: id, New: true,
		Decide: func(_ context.Context, h eventlog.History) (*domain.Event, error) {
			p := domain.Fold[domain.Partner](h.Events)
			ev, err := domain.CreatePartner(&p, id, name, o.ledger.Env(), origins, brand, time.Now())
			return &ev, err
		},
	})
	if err != nil {
		return "", domain.NewKey{}, err
	}
	key, err := o.IssueKey(ctx, id)
	return id, key, err
}

// IssueKey adds a key to an existing partner of this stack.
func (o *Operators) IssueKey(ctx context.Context, partnerID string) (domain.NewKey, error) {
	if !domain.ValidID(domain.PrefixPartner, partnerID) {
		return domain.NewKey{}, domain.NotFound("partner", partnerID)
	}
	key := domain.GenerateKey(o.ledger.Env())
	_, err := o.ledger.Execute(ctx, eventlog.Command{
		Partner: partnerID, Aggregate: partnerID,
		Decide: func(_ context.Context, h eventlog.History) (*domain.Event, error) {
			p := domain.Fold[domain.Partner](h.Events)
			if !p.Exists() {
				return nil, domain.NotFound("partner", partnerID)
			}
			ev, err := domain.IssueKey(&p, key, time.Now())
			return &ev, err
		},
	})
	return key, err
}

// RevokeKey finds the key shown as prefix at issuance and revokes it. It
// returns the key's partner.
func (o *Operators) RevokeKey(ctx context.Context, prefix string) (string, error) {
	partnerID, keyID, err := o.findKey(ctx, prefix)
	if err != nil {
		return "", err
	}
	_, err = o.ledger.Execute(ctx, eventlog.Command{
		Partner: partnerID, Aggregate: partnerID,
		Decide: func(_ context.Context, h eventlog.History) (*domain.Event, error) {
			p := domain.Fold[domain.Partner](h.Events)
			ev, err := domain.RevokeKey(&p, keyID, time.Now())
			return &ev, err
		},
	})
	return partnerID, err
}

// findKey scans the ledger's key issuances, by an operator or a partner's
// roll, for prefix. Only key events are read: the filter is applied by the
// server.
func (o *Operators) findKey(ctx context.Context, prefix string) (partnerID, keyID string, err error) {
	var found bool
	for _, typ := range []string{"partner.key_issued", "partner.key_rolled"} {
		if found || err != nil {
			break
		}
		err = o.scan(ctx, typ, func(ev domain.Event) bool {
			var id, p string
			switch k := ev.Payload.(type) {
			case *domain.KeyIssued:
				id, p = k.KeyID, k.Prefix
			case *domain.KeyRolled:
				id, p = k.KeyID, k.Prefix
			}
			if p == prefix {
				partnerID, keyID, found = ev.PartnerID, id, true
			}
			return found
		})
	}
	if err == nil && !found {
		err = domain.ProblemNotFound.New("No key with prefix %q on the %s stack.", prefix, o.ledger.Env())
	}
	return partnerID, keyID, err
}

// scan reads every event of one type in ledger order until visit returns
// true.
func (o *Operators) scan(ctx context.Context, eventType string, visit func(domain.Event) bool) error {
	filter := o.ledger.Subjects().OfType(eventType)
	recs, pending, err := o.ledger.Scan(ctx, filter, 0, scanPage)
	return walkEvents(ctx, o.ledger, filter, recs, pending, err, func(_ eventlog.Record, ev domain.Event) bool { return visit(ev) })
}

// scanPage is how many events a walk of the ledger reads at a time.
const scanPage = 1000

// walkEvents hands visit each event matching filter, from the page read
// first (recs, pending, err: a Scan's answer) on through the pages after
// it, oldest first, until visit returns true or no event is left.
func walkEvents(ctx context.Context, l Ledger, filter string, recs []eventlog.Record, pending uint64, err error, visit func(eventlog.Record, domain.Event) bool) error {
	for {
		if err != nil {
			return err
		}
		for _, r := range recs {
			ev, err := r.Event()
			if err != nil {
				return err
			}
			if visit(r, ev) {
				return nil
			}
		}
		if pending == 0 || len(recs) == 0 {
			return nil
		}
		recs, pending, err = l.Scan(ctx, filter, recs[len(recs)-1].Seq, scanPage)
	}
}

// ForgetDonor erases a donor's phone from the vault for good (the ledger
// keeps the donor id, which without the phone identifies no one). With a
// partner, it refuses unless the donor has a session with that partner.
//
// The donor's sessions carry the phone sealed with phone keys; erasing them
// (vault.Vault.Erase) first moves the other donors they sealed to vault
// entries of their own: the donor's sessions are found (sessionsOfDonor),
// then, for each key, the sessions stored while it sealed are read from
// the ledger. An erasure can wait up to PhoneKeyTimes.SealFor + Settle for
// a key that still seals.
func (o *Operators) ForgetDonor(ctx context.Context, secrets *secrets.Secrets, donorID, partner string) (Forgotten, error) {
	phones, err := vault.Open(ctx, o.ledger, secrets, vault.PhoneKeyTimes{})
	if err != nil {
		return Forgotten{}, err
	}
	sessions, from, err := o.sessionsOfDonor(ctx, donorID)
	f := Forgotten{SessionsFrom: from}
	if err != nil {
		return f, err
	}
	var own []domain.SealedPhone
	withPartner := partner == ""
	for _, s := range sessions {
		withPartner = withPartner || s.PartnerID == partner
		if s.Phone != nil {
			own = append(own, *s.Phone)
		}
	}
	if !withPartner {
		return f, domain.ProblemNotFound.New("Donor %s has no session with partner %s; nothing was erased.", donorID, partner)
	}
	f.Erased, err = phones.Erase(ctx, donorID, own, o.sealedWith)
	return f, err
}

// Forgotten is what ForgetDonor did.
type Forgotten struct {
	// Erased is false when no phone was stored (already erased, or never).
	Erased bool
	// SessionsFrom says where the donor's sessions were found.
	SessionsFrom string
}

// DonorSessionsTopic is the operators' question "which sessions were opened
// for this donor?" (the donor id), which a serving instance answers from
// its projections (Service.SessionsOfDonor) with a DonorSessionsAnswer.
const DonorSessionsTopic = "donor_sessions"

// DonorSessionsAnswer is an instance's answer to DonorSessionsTopic.
type DonorSessionsAnswer struct {
	Instance string                     `json:"instance"`
	Sessions []projections.DonorSession `json:"sessions"`
	Error    string                     `json:"error,omitempty"`
}

// askWait bounds the wait for an instance's answer, which first catches its
// projections up with the ledger.
const askWait = 30 * time.Second

// sessionsOfDonor finds every session opened for the donor, and says where.
// A serving instance answers from its projections, once they have caught up
// with the ledger: a look-up of the donor's sessions. With
// no instance to ask (the data directory of a stopped service, or instances
// of a build without the question), or one that cannot answer in time, it
// reads every donor session the ledger holds instead.
func (o *Operators) sessionsOfDonor(ctx context.Context, donor string) ([]projections.DonorSession, string, error) {
	actx, cancel := context.WithTimeout(ctx, askWait)
	data, err := o.control.Ask(actx, DonorSessionsTopic, []byte(donor))
	cancel()
	var why string
	switch {
	case errors.Is(err, control.ErrNoAnswerer):
		why = "no running instance answers"
	case err != nil:
		why = err.Error()
	default:
		var a DonorSessionsAnswer
		switch err := json.Unmarshal(data, &a); {
		case err != nil:
			why = "an unreadable answer: " + err.Error()
		case a.Error != "":
			why = "instance " + a.Instance + " could not answer: " + a.Error
		default:
			return a.Sessions, "the projections of instance " + a.Instance, nil
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, why, err
	}
	var out []projections.DonorSession
	err = o.scan(ctx, "donor_session.created", func(ev domain.Event) bool {
		if p := ev.Payload.(*domain.SessionCreated); p.DonorID == donor {
			out = append(out, projections.DonorSession{PartnerID: ev.PartnerID, SessionID: ev.AggregateID, Phone: p.Phone})
		}
		return false
	})
	return out, "every donor session in the ledger (" + why + ")", err
}

// sealedWith returns the phones of the sessions stored between from and to
// that key sealed: a read of the sessions created in a minute or two, not
// of the ledger's history.
func (o *Operators) sealedWith(ctx context.Context, key string, from, to time.Time) ([]vault.SealedFor, error) {
	var out []vault.SealedFor
	err := sessionsStored(ctx, o.ledger, from, to, func(p *domain.SessionCreated) bool {
		if p.Phone != nil && p.Phone.Key == key {
			out = append(out, vault.SealedFor{DonorID: p.DonorID, Phone: *p.Phone})
		}
		return false
	})
	return out, err
}

// sessionsStored hands visit each donor session stored between from and to,
// oldest first, until visit returns true. The read starts where the server's
// index puts from, so it costs the sessions in the span, not the history.
func sessionsStored(ctx context.Context, l Ledger, from, to time.Time, visit func(*domain.SessionCreated) bool) error {
	filter := l.Subjects().OfType("donor_session.created")
	recs, pending, err := l.ScanSince(ctx, filter, from, scanPage)
	return walkEvents(ctx, l, filter, recs, pending, err, func(r eventlog.Record, ev domain.Event) bool {
		return r.Stored.After(to) || visit(ev.Payload.(*domain.SessionCreated))
	})
}

// SessionsOfDonor returns every session opened for the donor, once this
// instance's projections have caught up with the ledger: a serving
// instance's answer to DonorSessionsTopic.
func (s *Service) SessionsOfDonor(ctx context.Context, donor string) ([]projections.DonorSession, error) {
	if !domain.ValidID(domain.PrefixDonor, donor) {
		return nil, fmt.Errorf("%q is not a donor id", donor)
	}
	if err := s.projector.CatchUp(ctx); err != nil {
		return nil, err
	}
	return s.store.SessionsOfDonor(donor)
}
