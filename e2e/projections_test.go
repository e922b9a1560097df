package e2e

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/partnergiving/giving/httpapi/apitest"
	"github.com/partnergiving/giving/projections"
)

// mixedWorkload drives the stack through the API and the operator commands.
func mixedWorkload(t *testing.T, ts *testStack) (*apitest.Client, []string) {
	t.Helper()
	a, pid := ts.partner(t)
	b, _ := ts.partner(t)
	var churchIDs []string
	for i := range 5 {
		var imp importResponse
		a.Do(http.MethodPost, importPath, fmt.Sprintf(`{"churches":[{"name":"A%d","external_id":"e%d"},{"name":""},{"name":"A%d bis","external_id":"e0"}]}`, i, i, i), nil).JSON(t, &imp)
		churchIDs = append(churchIDs, imp.Results[0].Church.ID)
		b.Do(http.MethodPost, importPath, fmt.Sprintf(`{"churches":[{"name":"B%d"}]}`, i), nil)
	}
	k, err := ts.Operators.IssueKey(context.Background(), pid)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ts.Operators.RevokeKey(context.Background(), k.Prefix); err != nil {
		t.Fatal(err)
	}
	ts.waitProjected(t)
	return a, churchIDs
}

func dumpStore(t *testing.T, s *projections.Store) map[string]map[string]string {
	t.Helper()
	d, err := s.Dump()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// freshReplay builds a projection file from sequence 1 and returns its dump.
func freshReplay(t *testing.T, ts *testStack) map[string]map[string]string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "fresh.db")
	if err := projections.BuildFile(context.Background(), ts.Ledger, path, nil); err != nil {
		t.Fatal(err)
	}
	s, err := projections.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	return dumpStore(t, s)
}

func TestRebuiltProjectionsEqualLive(t *testing.T) {
	t.Parallel()
	ts := startStack(t)
	a, ids := mixedWorkload(t, ts)
	live := dumpStore(t, ts.Store)
	if got := freshReplay(t, ts); !reflect.DeepEqual(got, live) {
		t.Fatalf("fresh replay differs from the live file\nlive:  %v\nfresh: %v", live, got)
	}

	// A live rebuild swaps the file while reads keep working.
	var wg sync.WaitGroup
	stop := make(chan struct{})
	failures := make(chan string, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			// Not through a.Do: a failure must not stop this goroutine
			// with t.Fatal.
			r := a.Do(http.MethodGet, "/v1/churches/"+ids[0], nil, nil)
			if r.Status != 200 {
				select {
				case failures <- fmt.Sprintf("read during rebuild: %d %s", r.Status, r.Body):
				default:
				}
			}
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := ts.Projector.Rebuild(ctx, nil); err != nil {
		t.Fatal(err)
	}
	close(stop)
	wg.Wait()
	select {
	case f := <-failures:
		t.Fatal(f)
	default:
	}
	if got := dumpStore(t, ts.Store); !reflect.DeepEqual(got, live) {
		t.Fatal("rebuilt live file differs from before")
	}
	// And the projector follows new writes into the swapped file.
	var imp importResponse
	a.Do(http.MethodPost, importPath, `{"churches":[{"name":"After rebuild"}]}`, nil).JSON(t, &imp)
	if r := a.Do(http.MethodGet, "/v1/churches/"+imp.Results[0].Church.ID, nil, nil); r.Status != 200 {
		t.Fatalf("write after rebuild not visible: %d", r.Status)
	}
}

func TestRestartResumesFromCheckpoint(t *testing.T) {
	t.Parallel()
	ts := startStack(t)
	a, ids := mixedWorkload(t, ts)
	before := dumpStore(t, ts.Store)
	applied := ts.Store.Applied()
	dir := ts.Dir
	ts.stop()

	ts = startStack(t, withDir(dir))
	if got := ts.Store.Applied(); got != applied {
		t.Fatalf("after restart: applied %d, want %d", got, applied)
	}
	if got := dumpStore(t, ts.Store); !reflect.DeepEqual(got, before) {
		t.Fatal("projections changed across a restart with no new events")
	}
	a.Base = ts.URL
	for _, id := range ids {
		if r := a.Do(http.MethodGet, "/v1/churches/"+id, nil, nil); r.Status != 200 {
			t.Fatalf("church %s after restart: %d", id, r.Status)
		}
	}
	// The same Idempotency-Key still replays after a restart (KV, not memory).
	key := apitest.Header{"Idempotency-Key": "across-restart"}
	first := a.Do(http.MethodPost, importPath, `{"churches":[{"name":"Restart"}]}`, key)
	ts.stop()
	ts = startStack(t, withDir(dir))
	a.Base = ts.URL
	again := a.Do(http.MethodPost, importPath, `{"churches":[{"name":"Restart"}]}`, key)
	if again.Status != 200 || string(again.Body) != string(first.Body) || again.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay after restart: %d %s", again.Status, again.Body)
	}
	if got := freshReplay(t, ts); !reflect.DeepEqual(got, dumpStore(t, ts.Store)) {
		t.Fatal("after restarts, live projections differ from a fresh replay")
	}
}
