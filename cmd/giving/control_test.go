package main

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/partnergiving/giving/eventlog/eventlogtest"
)

// A replay asked of an instance that is stopping is abandoned, and the stop
// waits for it to let go before the projection file and the ledger close:
// no half-built file is left and the requester hears why.
func TestReplayDuringShutdownIsAbandoned(t *testing.T) {
	ts := startStack(t)
	ts.partner(t)
	nc := ts.ledger.Conn()
	reports := make(chan *nats.Msg, 64)
	inbox := nc.NewRespInbox()
	if _, err := nc.ChanSubscribe(inbox, reports); err != nil {
		t.Fatal(err)
	}

	// Hold the one-rebuild-at-a-time lock, as a rebuild under way would,
	// so the request waits inside the instance.
	ts.control.mu.Lock()
	if err := nc.PublishRequest(replaySubject(ts.ledger.Env()), inbox, nil); err != nil {
		t.Fatal(err)
	}
	// Messages reach the handler one at a time: once the second (which
	// asks nothing) is delivered, the handler has taken the first.
	if err := nc.Publish(replaySubject(ts.ledger.Env()), nil); err != nil {
		t.Fatal(err)
	}
	eventlogtest.WaitFor(t, 10*time.Second, "the instance to take the replay request", func() bool {
		n, _ := ts.control.sub.Delivered()
		return n == 2
	})

	closed := make(chan struct{})
	go func() {
		defer close(closed)
		ts.stop()
	}()
	eventlogtest.WaitFor(t, 10*time.Second, "the stop to abandon the replay", func() bool {
		return ts.control.ctx.Err() != nil
	})
	select {
	case <-closed:
		t.Fatal("the stack closed while its replay was still to run")
	default:
	}
	ts.control.mu.Unlock()
	select {
	case <-closed:
	case <-time.After(30 * time.Second):
		t.Fatal("the stack did not close after the replay was abandoned")
	}

	if _, err := os.Stat(projectionsPath(ts.cfg.Ledger) + ".rebuild"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the abandoned replay left its file behind (%v)", err)
	}
	var final replayReport
	for len(reports) > 0 && !final.Done {
		if err := json.Unmarshal((<-reports).Data, &final); err != nil {
			t.Fatal(err)
		}
	}
	if !final.Done || !strings.Contains(final.Error, "stopped before the rebuild finished") {
		t.Fatalf("the requester heard %+v", final)
	}
}
