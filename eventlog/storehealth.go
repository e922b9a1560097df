package eventlog

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/partnergiving/giving/domain"
)

// When a write to the embedded server's store fails (the disk is full), the
// server's file store keeps refusing every write after it, even once the
// disk has room again, until the store is opened again; appends time out
// meanwhile. Nothing told the service: writes answered 503 for minutes
// after space was freed, while /readyz said ready. So the embedded server's
// errors are watched (natsLog): a store that stopped writing makes the
// ledger unwritable (Writable, and so /readyz, say so at once; appends fail
// fast instead of timing out), and once the store's disk has room again,
// the ledger restarts the server's JetStream, which opens every store from
// what is on disk, and is writable again. A ledger on an external cluster
// leaves this to the cluster's operators.

// storeRoom is the free space the store's disk must have before JetStream
// is restarted: a message block or two for each stream and bucket.
const storeRoom = 32 << 20

// storeHealth says whether the embedded server's store can write.
type storeHealth struct {
	// failed is what the server said when a store stopped writing; nil
	// while every store writes.
	failed atomic.Pointer[string]
	// up is a context that ends when a store stops writing: appends under
	// way end with it, since the server does not answer them.
	up   atomic.Pointer[storeUp]
	wake chan struct{}
}

type storeUp struct {
	ctx  context.Context
	down context.CancelFunc
}

func newStoreHealth() *storeHealth {
	h := &storeHealth{wake: make(chan struct{}, 1)}
	h.rise()
	return h
}

// rise starts a new spell of the store writing.
func (h *storeHealth) rise() {
	ctx, down := context.WithCancel(context.Background())
	h.up.Store(&storeUp{ctx: ctx, down: down})
}

// heard takes in one of the server's error lines.
func (h *storeHealth) heard(line string) {
	if h == nil || !(strings.Contains(line, "Critical write error") || strings.Contains(line, "no space left")) {
		return
	}
	if h.failed.CompareAndSwap(nil, &line) {
		h.up.Load().down()
		select {
		case h.wake <- struct{}{}:
		default:
		}
	}
}

// errStoreStopped ends an append under way when the store stops writing.
var errStoreStopped = errors.New("the embedded NATS server's store stopped writing")

// whileUp returns ctx, ended with errStoreStopped if the embedded server's
// store stops writing first, and the function that releases it.
func (l *Ledger) whileUp(ctx context.Context) (context.Context, func()) {
	if l.health == nil {
		return ctx, func() {}
	}
	ctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(l.health.up.Load().ctx, func() { cancel(errStoreStopped) })
	return ctx, func() {
		stop()
		cancel(nil)
	}
}

// Writable reports, as an unavailable error, that the ledger cannot store
// writes now: the embedded server's store stopped writing (its disk is
// full) and has not been opened again since. Nil while it can, or when
// this process cannot tell (an external cluster).
func (l *Ledger) Writable() error {
	if l.health == nil {
		return nil
	}
	if line := l.health.failed.Load(); line != nil {
		return fmt.Errorf("%w: the embedded NATS server's store stopped writing (%s); the ledger writes again once its disk has %d MiB free", domain.ErrUnavailable, *line, storeRoom>>20)
	}
	return nil
}

// healStore waits for a store to stop writing, then for its disk to have
// room, and restarts the embedded server's JetStream, until ctx ends.
func (l *Ledger) healStore(ctx context.Context, jsCfg server.JetStreamConfig) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-l.health.wake:
		case <-tick.C:
		}
		line := l.health.failed.Load()
		if line == nil {
			continue
		}
		free, err := freeSpace(jsCfg.StoreDir)
		if err != nil || free < storeRoom {
			continue
		}
		l.cfg.Log.Warn().Str("cause", *line).Uint64("free_bytes", free).Msg("the store's disk has room again; restarting JetStream to open its stores")
		if err := l.restartJetStream(jsCfg); err != nil {
			l.cfg.Log.Error().Err(err).Msg("JetStream restart failed; trying again")
			continue
		}
		l.health.rise()
		l.health.failed.CompareAndSwap(line, nil)
		l.cfg.Log.Warn().Msg("JetStream restarted: the ledger writes again")
	}
}

// restartJetStream shuts the embedded server's JetStream down and starts
// it again on the same store, which it opens from disk.
func (l *Ledger) restartJetStream(jsCfg server.JetStreamConfig) error {
	if err := l.srv.ShutdownJetStream(); err != nil {
		return fmt.Errorf("shut JetStream down: %w", err)
	}
	// EnableJetStream puts its "jetstream" directory under the one it is
	// given, as the server's options did.
	jsCfg.StoreDir = filepath.Dir(jsCfg.StoreDir)
	if err := l.srv.EnableJetStream(&jsCfg); err != nil {
		return fmt.Errorf("start JetStream: %w", err)
	}
	return nil
}
