package eventlog_test

import (
	"context"
	"errors"
	"net/url"
	"os"
	"testing"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog"
)

// A data directory is one process's at a time, and says where its instance
// takes operator commands; a ledger without a listener records nothing, and
// a closed one leaves the directory free.
func TestDataDirectoryLockAndInstanceRecord(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	if inst, err := eventlog.RunningInstance(dir); inst != nil || err != nil {
		t.Fatalf("an unused directory: %+v %v", inst, err)
	}
	if inst, err := eventlog.RunningInstance(dir + "/missing"); inst != nil || err != nil {
		t.Fatalf("a missing directory: %+v %v", inst, err)
	}
	l, err := eventlog.Open(ctx, eventlog.Config{Env: domain.Sandbox, DataDir: dir, NATSListen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(l.ClientURL())
	inst, err := eventlog.RunningInstance(dir)
	if err != nil || inst == nil || inst.NATS != u.Host || inst.PID != os.Getpid() {
		t.Fatalf("running instance %+v (%v), want nats %s pid %d", inst, err, u.Host, os.Getpid())
	}
	if _, err := eventlog.Open(ctx, eventlog.Config{Env: domain.Sandbox, DataDir: dir}); !errors.Is(err, eventlog.ErrDataDirInUse) {
		t.Fatalf("a second open of a directory in use: %v", err)
	}
	l.Close()
	if inst, err := eventlog.RunningInstance(dir); inst != nil || err != nil {
		t.Fatalf("after close: %+v %v", inst, err)
	}

	quiet, err := eventlog.Open(ctx, eventlog.Config{Env: domain.Sandbox, DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer quiet.Close()
	if _, err := eventlog.RunningInstance(dir); !errors.Is(err, eventlog.ErrDataDirInUse) {
		t.Fatalf("a directory held without a listener: %v", err)
	}
}
