package eventlog

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/segmentio/ksuid"

	"github.com/partnergiving/giving/domain"
)

// Vault keeps donor phone numbers, the service's only PII, encrypted with
// AES-GCM in a JetStream KV bucket shared by every instance. Nothing else
// stores a phone: events, projections, logs and responses carry the donor
// id. Forgetting a donor overwrites the stored ciphertext and purges the
// key, so the phone is gone for good while the ledger stays intact.
type Vault struct {
	kv     jetstream.KeyValue
	stream jetstream.Stream
	seal   *Sealer
	donor  []byte
}

// OpenVault opens the vault bucket. Its backing stream is created here
// rather than by the KV API, because KV buckets deny message deletion and
// erasing a phone for good needs JetStream's secure delete, which overwrites
// the stored bytes; a purge alone would leave the ciphertext in the block
// files until compaction. Otherwise it is an ordinary one-revision bucket.
func (l *Ledger) OpenVault(ctx context.Context, secrets *Secrets) (*Vault, error) {
	stream, kv, err := l.vaultBucket(ctx)
	if err != nil {
		return nil, err
	}
	return &Vault{kv: kv, stream: stream, seal: secrets.Sealer("vault"), donor: secrets.Key("donor-id")}, nil
}

// ForgetDonor erases a donor's phone as Vault.Forget does. It needs no keys
// (erasing ciphertext does not read it), so an operator tool can run it
// without the master key.
func (l *Ledger) ForgetDonor(ctx context.Context, donorID string) error {
	stream, kv, err := l.vaultBucket(ctx)
	if err != nil {
		return err
	}
	return forget(ctx, kv, stream, donorID)
}

func (l *Ledger) vaultBucket(ctx context.Context) (jetstream.Stream, jetstream.KeyValue, error) {
	name := "VAULT_" + strings.ToUpper(string(l.cfg.Env))
	cfg := jetstream.StreamConfig{
		Name:              "KV_" + name,
		Description:       "Donor phone numbers, AES-GCM sealed, keyed by donor id.",
		Subjects:          []string{"$KV." + name + ".>"},
		MaxMsgsPerSubject: 1,
		Discard:           jetstream.DiscardNew,
		Storage:           jetstream.FileStorage,
		Replicas:          l.cfg.Replicas,
		AllowRollup:       true,
		AllowDirect:       true,
		DenyDelete:        false,
	}
	var stream jetstream.Stream
	kv, err := setUp(ctx, "open vault", func(ctx context.Context) (jetstream.KeyValue, error) {
		var err error
		if stream, err = l.js.CreateOrUpdateStream(ctx, cfg); err != nil {
			return nil, err
		}
		return l.js.KeyValue(ctx, name)
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

// Put stores the donor's phone, unless the vault already holds it. A donor
// id is a keyed hash of the partner and the phone, so a stored entry for the
// id is this very phone. The store is conditional on the key holding nothing
// (or a forgotten entry), checked by the stream's leader: a new donor costs
// one round trip and one synced write, a returning donor two round trips (the
// refused store, then the client's look at whether the key holds a forgotten
// entry) and no write. Donor sessions are mostly new donors' (a donor
// enrolls once), for whom the read before the store was a round trip more.
func (v *Vault) Put(ctx context.Context, donorID, phone string) error {
	_, err := v.kv.Create(ctx, donorID, v.seal.Seal([]byte(phone), []byte(donorID)))
	if err != nil && !errors.Is(err, jetstream.ErrKeyExists) {
		return natsErr("vault put", err)
	}
	return nil
}

// ErrForgotten means the vault holds no phone for the donor: never stored,
// or erased.
var ErrForgotten = errors.New("vault: no phone for this donor")

// Phone returns the donor's phone.
func (v *Vault) Phone(ctx context.Context, donorID string) (string, error) {
	entry, err := v.kv.Get(ctx, donorID)
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return "", ErrForgotten
	}
	if err != nil {
		return "", natsErr("vault get", err)
	}
	phone, err := v.seal.Open(entry.Value(), []byte(donorID))
	if err != nil {
		return "", natsErr("vault get", err)
	}
	return string(phone), nil
}

// Forget erases the donor's phone: every stored revision is overwritten on
// disk (JetStream secure erase), then the key is purged.
func (v *Vault) Forget(ctx context.Context, donorID string) error {
	return forget(ctx, v.kv, v.stream, donorID)
}

func forget(ctx context.Context, kv jetstream.KeyValue, stream jetstream.Stream, donorID string) error {
	found := false
	for {
		entry, err := kv.Get(ctx, donorID)
		if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
			break
		}
		if err != nil {
			return natsErr("vault forget", err)
		}
		found = true
		if err := stream.SecureDeleteMsg(ctx, entry.Revision()); err != nil {
			return natsErr("vault forget: erase", err)
		}
	}
	if !found {
		return ErrForgotten
	}
	if err := kv.Purge(ctx, donorID); err != nil {
		return natsErr("vault forget: purge", err)
	}
	return nil
}
