package vault

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"strings"
	"sync"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/segmentio/ksuid"
	"golang.org/x/sync/singleflight"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog"
	"github.com/partnergiving/giving/secrets"
)

// Vault keeps donor phone numbers, the service's only PII, encrypted with
// AES-GCM, in a JetStream KV bucket shared by every instance. A session's
// event carries its donor's phone sealed with a phone key the vault holds
// (phonekeys.go); a donor whose key was erased for another donor's sake
// has an entry of their own, under the donor id. Nothing else stores a
// phone: events, projections, logs and responses carry the donor id and,
// in internal events only, the sealed phone. Forgetting a donor overwrites
// the stored keys and entry and purges them, so the phone is gone for good
// while the ledger stays intact.
type Vault struct {
	kv     jetstream.KeyValue
	stream jetstream.Stream
	seal   *secrets.Sealer
	donor  []byte
	times  PhoneKeyTimes

	// current is the key this instance seals with (under mu); making
	// makes the next one once for every session waiting for it.
	mu      sync.Mutex
	current *phoneKey
	making  singleflight.Group
}

// Open opens the vault bucket. Its backing stream is created here
// rather than by the KV API, because KV buckets deny message deletion and
// erasing a phone for good needs JetStream's secure delete, which overwrites
// the stored bytes; a purge alone would leave the ciphertext in the block
// files until compaction. Otherwise it is an ordinary one-revision bucket.
func Open(ctx context.Context, l *eventlog.Ledger, secrets *secrets.Secrets, times PhoneKeyTimes) (*Vault, error) {
	stream, kv, err := vaultBucket(ctx, l)
	if err != nil {
		return nil, err
	}
	return &Vault{kv: kv, stream: stream, seal: secrets.Sealer("vault"), donor: secrets.Key("donor-id"), times: times.withDefaults()}, nil
}

func vaultBucket(ctx context.Context, l *eventlog.Ledger) (jetstream.Stream, jetstream.KeyValue, error) {
	name := "VAULT_" + strings.ToUpper(string(l.Env()))
	cfg := jetstream.StreamConfig{
		Name:              "KV_" + name,
		Description:       "Donor phone numbers, AES-GCM sealed, keyed by donor id.",
		Subjects:          []string{"$KV." + name + ".>"},
		MaxMsgsPerSubject: 1,
		Discard:           jetstream.DiscardNew,
		Storage:           jetstream.FileStorage,
		Replicas:          l.Replicas(),
		AllowRollup:       true,
		AllowDirect:       true,
		DenyDelete:        false,
	}
	var stream jetstream.Stream
	kv, err := eventlog.SetUp(ctx, "open vault", func(ctx context.Context) (jetstream.KeyValue, error) {
		var err error
		if stream, err = l.JetStream().CreateOrUpdateStream(ctx, cfg); err != nil {
			return nil, err
		}
		return l.JetStream().KeyValue(ctx, name)
	})
	if err != nil {
		return nil, nil, err
	}
	return stream, kv, nil
}

// DonorID is the donor's id within one partner: a keyed hash of the partner
// and the phone. The same phone gives the same id for one partner and a
// different id for another, and without the key nobody can get from an id
// back to a phone.
func (v *Vault) DonorID(partnerID, phone string) string {
	m := hmac.New(sha256.New, v.donor)
	m.Write([]byte(partnerID))
	m.Write([]byte{0})
	m.Write([]byte(phone))
	id, err := ksuid.FromBytes(m.Sum(nil)[:20])
	if err != nil {
		panic("eventlog: ksuid from 20 bytes: " + err.Error())
	}
	return domain.PrefixDonor + id.String()
}

// Put stores the donor's phone in an entry of its own, unless the vault
// already holds one. A donor id is a keyed hash of the partner and the
// phone, so a stored entry for the id is this very phone. The store is
// conditional on the key holding nothing (or a forgotten entry), checked by
// the stream's leader: one round trip and one synced write.
func (v *Vault) Put(ctx context.Context, donorID, phone string) error {
	_, err := v.kv.Create(ctx, donorID, v.seal.Seal([]byte(phone), []byte(donorID)))
	if err != nil && !errors.Is(err, jetstream.ErrKeyExists) {
		return eventlog.NATSErr("vault put", err)
	}
	return nil
}

// ErrForgotten means the vault holds no phone for the donor: never stored,
// or erased.
var ErrForgotten = errors.New("vault: no phone for this donor")

// ownPhone returns the phone in the donor's own entry.
func (v *Vault) ownPhone(ctx context.Context, donorID string) (string, error) {
	entry, err := v.kv.Get(ctx, donorID)
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return "", ErrForgotten
	}
	if err != nil {
		return "", eventlog.NATSErr("vault get", err)
	}
	phone, err := v.seal.Open(entry.Value(), []byte(donorID))
	if err != nil {
		return "", eventlog.NATSErr("vault get", err)
	}
	return string(phone), nil
}

// forget erases the entry under key, a donor's or a phone key's: every
// stored revision is overwritten on disk (JetStream secure erase), then the
// key is purged.
func forget(ctx context.Context, kv jetstream.KeyValue, stream jetstream.Stream, key string) error {
	found := false
	for {
		entry, err := kv.Get(ctx, key)
		if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
			break
		}
		if err != nil {
			return eventlog.NATSErr("vault forget", err)
		}
		found = true
		if err := stream.SecureDeleteMsg(ctx, entry.Revision()); err != nil {
			return eventlog.NATSErr("vault forget: erase", err)
		}
	}
	if !found {
		return ErrForgotten
	}
	if err := kv.Purge(ctx, key); err != nil {
		return eventlog.NATSErr("vault forget: purge", err)
	}
	return nil
}
