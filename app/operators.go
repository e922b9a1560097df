package app

import (
	"context"
	"time"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog"
)

// Operators are the operator's use cases: onboarding partners, managing
// their keys, erasing a donor's phone. They need only the ledger, loading
// each aggregate from it, so they work the same whether an instance is
// running (reached over NATS) or not (the CLI opens the data directory).
type Operators struct {
	ledger *eventlog.Ledger
}

// NewOperators returns the operator use cases on ledger.
func NewOperators(l *eventlog.Ledger) *Operators { return &Operators{ledger: l} }

// CreatePartner onboards a partner and issues its first key.
func (o *Operators) CreatePartner(ctx context.Context, name string, origins []string) (string, domain.NewKey, error) {
	id := domain.NewID(domain.PrefixPartner)
	_, err := o.ledger.Execute(ctx, eventlog.Command{
		Partner: id, Aggregate: id, New: true,
		Decide: func(_ context.Context, h eventlog.History) (*domain.Event, error) {
			p := domain.Fold[domain.Partner](h.Events)
			ev, err := domain.CreatePartner(&p, id, name, o.ledger.Env(), origins, time.Now())
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

// findKey scans the ledger's key issuances for prefix. Only key events are
// read: the filter is applied by the server.
func (o *Operators) findKey(ctx context.Context, prefix string) (partnerID, keyID string, err error) {
	var found bool
	err = o.scan(ctx, "partner.key_issued", func(ev domain.Event) bool {
		if k := ev.Payload.(*domain.KeyIssued); k.Prefix == prefix {
			partnerID, keyID, found = ev.PartnerID, k.KeyID, true
		}
		return found
	})
	if err == nil && !found {
		err = domain.ProblemNotFound.New("No key with prefix %q on the %s stack.", prefix, o.ledger.Env())
	}
	return partnerID, keyID, err
}

// scan reads every event of one type in ledger order until visit returns
// true.
func (o *Operators) scan(ctx context.Context, eventType string, visit func(domain.Event) bool) error {
	filter := o.ledger.Subjects().OfType(eventType)
	recs, pending, err := o.ledger.Read(ctx, filter, 0, scanPage)
	return walkEvents(ctx, o.ledger, filter, recs, pending, err, func(_ eventlog.Record, ev domain.Event) bool { return visit(ev) })
}

// scanPage is how many events a walk of the ledger reads at a time.
const scanPage = 1000

// walkEvents hands visit each event matching filter, from the page read
// first (recs, pending, err: a Read's answer) on through the pages after
// it, oldest first, until visit returns true or no event is left.
func walkEvents(ctx context.Context, l *eventlog.Ledger, filter string, recs []eventlog.Record, pending uint64, err error, visit func(eventlog.Record, domain.Event) bool) error {
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
		recs, pending, err = l.Read(ctx, filter, recs[len(recs)-1].Seq, scanPage)
	}
}

// ForgetDonor erases a donor's phone from the vault for good (the ledger
// keeps the donor id, which without the phone identifies no one). With a
// partner, it refuses unless the donor has a session with that partner.
// erased is false when no phone was stored (already erased, or never).
//
// The donor's sessions carry the phone sealed with phone keys; erasing them
// (eventlog.Vault.Erase) first moves the other donors they sealed to vault
// entries of their own: the ledger's sessions are read for the donor's,
// then, for each key, those stored while it sealed. An erasure can wait up
// to PhoneKeyTimes.SealFor + Settle for a key that still seals.
func (o *Operators) ForgetDonor(ctx context.Context, secrets *eventlog.Secrets, donorID, partner string) (erased bool, err error) {
	vault, err := o.ledger.OpenVault(ctx, secrets, eventlog.PhoneKeyTimes{})
	if err != nil {
		return false, err
	}
	var own []domain.SealedPhone
	withPartner := partner == ""
	err = o.scan(ctx, "donor_session.created", func(ev domain.Event) bool {
		p := ev.Payload.(*domain.SessionCreated)
		if p.DonorID == donorID {
			withPartner = withPartner || ev.PartnerID == partner
			if p.Phone != nil {
				own = append(own, *p.Phone)
			}
		}
		return false
	})
	if err != nil {
		return false, err
	}
	if !withPartner {
		return false, domain.ProblemNotFound.New("Donor %s has no session with partner %s; nothing was erased.", donorID, partner)
	}
	return vault.Erase(ctx, donorID, own, o.sealedWith)
}

// sealedWith returns the phones of the sessions stored between from and to
// that key sealed: a read of the sessions created in a minute or two, not
// of the ledger's history.
func (o *Operators) sealedWith(ctx context.Context, key string, from, to time.Time) ([]eventlog.SealedFor, error) {
	var out []eventlog.SealedFor
	err := sessionsStored(ctx, o.ledger, from, to, func(p *domain.SessionCreated) bool {
		if p.Phone != nil && p.Phone.Key == key {
			out = append(out, eventlog.SealedFor{DonorID: p.DonorID, Phone: *p.Phone})
		}
		return false
	})
	return out, err
}

// sessionsStored hands visit each donor session stored between from and to,
// oldest first, until visit returns true. The read starts where the server's
// index puts from, so it costs the sessions in the span, not the history.
func sessionsStored(ctx context.Context, l *eventlog.Ledger, from, to time.Time, visit func(*domain.SessionCreated) bool) error {
	filter := l.Subjects().OfType("donor_session.created")
	recs, pending, err := l.ReadSince(ctx, filter, from, scanPage)
	return walkEvents(ctx, l, filter, recs, pending, err, func(r eventlog.Record, ev domain.Event) bool {
		return r.Stored.After(to) || visit(ev.Payload.(*domain.SessionCreated))
	})
}
