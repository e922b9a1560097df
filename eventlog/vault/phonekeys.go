package vault

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/segmentio/ksuid"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog"
	"github.com/partnergiving/giving/secrets"
)

// Phone keys. A session's event carries its donor's phone, sealed with a
// phone key: the phone is durable in the session's own synced write, so a
// crash can never leave an event without its phone, nor a phone without
// its event. The key is what the vault holds (sealed with the vault's own
// key), so erasing it erases every phone sealed with it for good while the
// ledger stays intact (crypto-shredding).
//
// One key seals the phones of every new session an instance opens during
// PhoneKeyTimes.SealFor, so making keys costs one synced write a window, not
// one a session. Forgetting a donor erases the keys that sealed the donor's
// phones; the other donors those keys sealed are moved first to vault
// entries of their own (Vault.Erase). A key is erased only once no event
// sealed with it can still be on its way to the ledger: SealFor, then
// Settle, after the key was stored.

// phoneKeyPrefix starts the vault key of a phone key; a donor's own entry
// is under the donor id (dn_...).
const phoneKeyPrefix = "pk_"

// PhoneKeyTimes says how long one phone key seals.
type PhoneKeyTimes struct {
	// SealFor is how long an instance seals new phones with one key before
	// it makes the next; 0 means 30 seconds.
	SealFor time.Duration
	// Settle bounds how long after its key stops sealing a session's event
	// may still be stored: the append of a sealed phone gives up then, and
	// erasing the key waits for it. It also covers the clocks' skew
	// between instances. 0 means one minute.
	Settle time.Duration
}

func (t PhoneKeyTimes) withDefaults() PhoneKeyTimes {
	if t.SealFor <= 0 {
		t.SealFor = 30 * time.Second
	}
	if t.Settle <= 0 {
		t.Settle = time.Minute
	}
	return t
}

// phoneKeyEntry is a phone key as the vault stores it.
type phoneKeyEntry struct {
	// Key is the 32-byte key, sealed with the vault's key.
	Key []byte `json:"key"`
	// OpenFor is how long after it was stored an event sealed with it may
	// still be stored (SealFor + Settle of the instance that made it), in
	// milliseconds: erasing the key waits that long.
	OpenFor int64 `json:"open_for_ms"`
}

// closes is when no event sealed with the key can be stored any more, for
// a key the vault stored at stored.
func (e phoneKeyEntry) closes(stored time.Time) time.Time {
	return stored.Add(time.Duration(e.OpenFor) * time.Millisecond)
}

// sessionsSpan is when the sessions a key sealed were stored: after the
// key (stored), before it closed, widened by clockSkew on each side.
func sessionsSpan(stored, closes time.Time) (from, to time.Time) {
	return stored.Add(-clockSkew), closes.Add(clockSkew)
}

// phoneKey is the key an instance seals with now.
type phoneKey struct {
	name   string
	sealer *secrets.Sealer
	// sealUntil ends the sealing; storeBy bounds the appends of what was
	// sealed. Both are on this instance's clock.
	sealUntil, storeBy time.Time
}

// SealPhone seals the donor's phone for a new session's event. The event
// must be stored before storeBy: an append still under way then is given
// up, since the key may be erased after it.
func (v *Vault) SealPhone(ctx context.Context, donorID, phone string) (sealed domain.SealedPhone, storeBy time.Time, err error) {
	k, err := v.sealingKey(ctx)
	if err != nil {
		return domain.SealedPhone{}, time.Time{}, err
	}
	return domain.SealedPhone{Key: k.name, Sealed: k.sealer.Seal([]byte(phone), []byte(donorID))}, k.storeBy, nil
}

// sealingKey returns the key to seal with now, making the next one when the
// current one's window has passed. The sessions that find no key wait for
// one making, not each for its own: while the vault cannot be written, a
// wave of sessions waits for one attempt (newKeyTimeout at most), not for
// as many attempts in a row as there are sessions.
func (v *Vault) sealingKey(ctx context.Context) (*phoneKey, error) {
	if k := v.sealing(); k != nil {
		return k, nil
	}
	made := v.making.DoChan("", func() (any, error) {
		if k := v.sealing(); k != nil {
			return k, nil
		}
		mctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), newKeyTimeout)
		defer cancel()
		return v.newKey(mctx)
	})
	select {
	case r := <-made:
		if r.Err != nil {
			return nil, r.Err
		}
		return r.Val.(*phoneKey), nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// newKeyTimeout bounds making a phone key (a variable for tests).
var newKeyTimeout = 10 * time.Second

// sealing returns the key this instance seals with now, nil when there is
// none.
func (v *Vault) sealing() *phoneKey {
	v.mu.Lock()
	defer v.mu.Unlock()
	if k := v.current; k != nil && time.Now().Before(k.sealUntil) {
		return k
	}
	return nil
}

// newKey stores a new phone key in the vault and seals with it from now on.
func (v *Vault) newKey(ctx context.Context) (*phoneKey, error) {
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return nil, err
	}
	name := phoneKeyPrefix + ksuid.New().String()
	entry, err := json.Marshal(phoneKeyEntry{Key: v.seal.Seal(raw, []byte(name)), OpenFor: (v.times.SealFor + v.times.Settle).Milliseconds()})
	if err != nil {
		return nil, err
	}
	start := time.Now()
	if _, err := v.kv.Create(ctx, name, entry); err != nil {
		return nil, eventlog.NATSErr("vault: new phone key", err)
	}
	k := &phoneKey{name: name, sealer: secrets.NewSealer(raw), sealUntil: start.Add(v.times.SealFor), storeBy: start.Add(v.times.SealFor + v.times.Settle)}
	v.mu.Lock()
	v.current = k
	v.mu.Unlock()
	// The key leaves memory when it stops sealing, whether or not the
	// next one is made: once erased, nothing may still open with it.
	time.AfterFunc(v.times.SealFor, func() {
		v.mu.Lock()
		defer v.mu.Unlock()
		if v.current == k {
			v.current = nil
		}
	})
	return k, nil
}

// storedKey is a phone key as the vault holds it.
type storedKey struct {
	sealer *secrets.Sealer
	// stored is when the vault stored it; closes is when no event sealed
	// with it can be stored any more (stored + OpenFor).
	stored, closes time.Time
}

// storedKey reads the phone key name from the vault, or ErrForgotten once
// it is erased.
func (v *Vault) storedKey(ctx context.Context, name string) (storedKey, error) {
	if !strings.HasPrefix(name, phoneKeyPrefix) {
		return storedKey{}, fmt.Errorf("vault: %q is not a phone key", name)
	}
	got, err := v.kv.Get(ctx, name)
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return storedKey{}, ErrForgotten
	}
	if err != nil {
		return storedKey{}, eventlog.NATSErr("vault: phone key", err)
	}
	var entry phoneKeyEntry
	if err := json.Unmarshal(got.Value(), &entry); err != nil {
		return storedKey{}, fmt.Errorf("vault: phone key %s: %w", name, err)
	}
	raw, err := v.seal.Open(entry.Key, []byte(name))
	if err != nil {
		return storedKey{}, fmt.Errorf("vault: phone key %s: %w", name, err)
	}
	return storedKey{sealer: secrets.NewSealer(raw), stored: got.Created(), closes: entry.closes(got.Created())}, nil
}

// Phone returns the donor's phone: opened from sealed, the phone a session
// carries, while its key lasts; otherwise from the donor's own vault entry
// (a donor moved there when a key they shared was erased, or stored before
// sessions carried phones). ErrForgotten when neither holds it.
func (v *Vault) Phone(ctx context.Context, donorID string, sealed *domain.SealedPhone) (string, error) {
	if sealed != nil {
		k, err := v.storedKey(ctx, sealed.Key)
		if err == nil {
			phone, err := k.sealer.Open(sealed.Sealed, []byte(donorID))
			if err != nil {
				return "", fmt.Errorf("vault: phone of %s: %w", donorID, err)
			}
			return string(phone), nil
		}
		if !errors.Is(err, ErrForgotten) {
			return "", err
		}
	}
	return v.ownPhone(ctx, donorID)
}

// SealedFor is a phone a session carries, with the donor it is of.
type SealedFor struct {
	DonorID string
	Phone   domain.SealedPhone
}

// clockSkew widens the time a key's sessions are looked for in, for the
// clocks of the servers that stamp the vault's and the ledger's messages.
const clockSkew = time.Minute

// Erase forgets a donor's phone for good. own are the phones the donor's
// sessions carry; sharing(key, from, to) returns the phones of the
// sessions stored between from and to, whoever they are of, that key
// sealed: every session a key sealed is stored after the key, and before
// it closes. Every other donor a key sealed is moved to a vault entry of
// their own first, then the keys are erased (JetStream secure erase), then
// the donor's own entry, if any. It waits until no event sealed with the
// keys can still be stored (at most SealFor plus Settle after the newest
// was made). Each step can be run again, so an erasure cut short is
// finished by the next. erased is false when the vault held none of the
// donor's phone.
func (v *Vault) Erase(ctx context.Context, donorID string, own []domain.SealedPhone, sharing func(ctx context.Context, key string, from, to time.Time) ([]SealedFor, error)) (erased bool, err error) {
	keys := map[string]storedKey{}
	var closes time.Time
	for _, p := range own {
		if _, seen := keys[p.Key]; seen {
			continue
		}
		k, err := v.storedKey(ctx, p.Key)
		if errors.Is(err, ErrForgotten) {
			continue
		}
		if err != nil {
			return false, err
		}
		keys[p.Key] = k
		if k.closes.After(closes) {
			closes = k.closes
		}
	}
	if err := eventlog.Sleep(ctx, time.Until(closes)); err != nil {
		return false, err
	}
	for name, k := range keys {
		from, to := sessionsSpan(k.stored, k.closes)
		others, err := sharing(ctx, name, from, to)
		if err != nil {
			return false, err
		}
		for _, o := range others {
			if o.Phone.Key != name || o.DonorID == donorID {
				continue
			}
			phone, err := k.sealer.Open(o.Phone.Sealed, []byte(o.DonorID))
			if err != nil {
				// Not a phone this key can open (damaged, or not sealed
				// for this donor): the key's erasure takes nothing from
				// it, and it must not keep the donor's phone alive.
				continue
			}
			if err := v.Put(ctx, o.DonorID, string(phone)); err != nil {
				return false, err
			}
		}
		if err := forget(ctx, v.kv, v.stream, name); err != nil && !errors.Is(err, ErrForgotten) {
			return false, err
		}
	}
	err = forget(ctx, v.kv, v.stream, donorID)
	if errors.Is(err, ErrForgotten) {
		return len(keys) > 0, nil
	}
	return err == nil, err
}
