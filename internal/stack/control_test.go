package stack

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog"
	"github.com/partnergiving/giving/eventlog/control"
	"github.com/partnergiving/giving/eventlog/eventlogtest"
	"github.com/partnergiving/giving/httpapi"
)

// A replay asked of an instance that is stopping is abandoned, and the stop
// waits for it to let go before the projection file and the ledger close:
// no half-built file is left and the requester hears why.
func TestReplayDuringShutdownIsAbandoned(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := Open(ctx, Config{
		Ledger:    eventlog.Config{Env: domain.Sandbox, DataDir: t.TempDir()},
		PublicURL: "http://127.0.0.1:1",
		RateLimit: httpapi.RateLimit{PerSecond: 100, Burst: 100},
		Log:       zerolog.Nop(),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Start(ctx); err != nil {
		st.Close()
		t.Fatal(err)
	}
	if _, _, err := st.Operators.CreatePartner(ctx, "Partner", nil, domain.Brand{}); err != nil {
		st.Close()
		t.Fatal(err)
	}

	// Hold the one-rebuild-at-a-time lock, as a rebuild under way would,
	// so the request waits inside the instance.
	st.control.mu.Lock()
	replies, err := control.New(st.Ledger).Request(ReplayTopic)
	if err != nil {
		t.Fatal(err)
	}
	defer replies.Close()
	eventlogtest.WaitFor(t, 10*time.Second, "the instance to take the replay request", func() bool {
		return st.control.taken.Load() == 1
	})

	closed := make(chan struct{})
	go func() {
		defer close(closed)
		st.Close()
	}()
	eventlogtest.WaitFor(t, 10*time.Second, "the stop to abandon the replay", func() bool {
		return st.control.ctx.Err() != nil
	})
	select {
	case <-closed:
		t.Fatal("the stack closed while its replay was still to run")
	default:
	}
	st.control.mu.Unlock()
	select {
	case <-closed:
	case <-time.After(30 * time.Second):
		t.Fatal("the stack did not close after the replay was abandoned")
	}

	if _, err := os.Stat(ProjectionsPath(st.Config.Ledger) + ".rebuild"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the abandoned replay left its file behind (%v)", err)
	}
	var final ReplayReport
	for !final.Done {
		data, err := replies.Next(time.Second)
		if err != nil {
			break
		}
		if err := json.Unmarshal(data, &final); err != nil {
			t.Fatal(err)
		}
	}
	if !final.Done || !strings.Contains(final.Error, "stopped before the rebuild finished") {
		t.Fatalf("the requester heard %+v", final)
	}
}
