package eventlog_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog"
	"github.com/partnergiving/giving/eventlog/eventlogtest"
)

// On a cluster a history may come from a replica that lags behind the
// leader. A decision to append nothing, or a refusal, cannot be caught by the
// conditional append, so Execute asks the leader whether the history was
// whole and, if not, decides again. Here the first decision's history misses
// an event appended behind its back, as a lagging replica's would.
func TestDecisionsWithoutAnAppendAreMadeOnTheWholeHistory(t *testing.T) {
	cluster := eventlogtest.StartCluster(t, filepath.Join("..", "deploy", "nats"))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l, err := eventlog.Open(ctx, eventlog.Config{Env: domain.Sandbox, NATSURL: cluster.URL(), Replicas: 3})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)

	// behind appends a key behind the first decision's back and returns
	// what each decision saw.
	behind := func(pt string, decide func(h eventlog.History) (*domain.Event, error)) (eventlog.Outcome, []int, error) {
		var seen []int
		out, err := l.Execute(ctx, eventlog.Command{
			Partner: pt, Aggregate: pt,
			Decide: func(ctx context.Context, h eventlog.History) (*domain.Event, error) {
				seen = append(seen, len(h.Events))
				if len(seen) == 1 {
					if _, err := l.Append(ctx, keyIssued(pt), "", h.Last); err != nil {
						return nil, err
					}
				}
				return decide(h)
			},
		})
		return out, seen, err
	}

	t.Run("nothing to append", func(t *testing.T) {
		pt := createPartner(t, l, "Acme")
		out, seen, err := behind(pt, func(eventlog.History) (*domain.Event, error) { return nil, nil })
		if err != nil || out.Record != nil {
			t.Fatalf("execute: %+v, %v", out, err)
		}
		if len(seen) != 2 || seen[0] != 1 || seen[1] != 2 {
			t.Fatalf("decisions saw %v events; want [1 2]: a decision to append nothing must be made on the whole history", seen)
		}
	})

	t.Run("a refusal", func(t *testing.T) {
		// The decision refuses until it sees the key, as IssueKey refuses
		// a partner it cannot see yet.
		pt := createPartner(t, l, "Acme")
		out, seen, err := behind(pt, func(h eventlog.History) (*domain.Event, error) {
			if len(h.Events) < 2 {
				return nil, domain.NotFound("key", pt)
			}
			ev := keyIssued(pt)
			return &ev, nil
		})
		if err != nil || out.Record == nil {
			t.Fatalf("execute: %+v, %v; a refusal made on a stale history must be decided again", out, err)
		}
		if len(seen) != 2 || seen[0] != 1 || seen[1] != 2 {
			t.Fatalf("decisions saw %v events; want [1 2]", seen)
		}
	})

	t.Run("a refusal on the whole history stands", func(t *testing.T) {
		pt := createPartner(t, l, "Acme")
		decisions := 0
		_, err := l.Execute(ctx, eventlog.Command{
			Partner: pt, Aggregate: pt,
			Decide: func(context.Context, eventlog.History) (*domain.Event, error) {
				decisions++
				return nil, domain.NotFound("key", pt)
			},
		})
		if domain.ErrorKind(err) != domain.KindNotFound || decisions != 1 {
			t.Fatalf("execute: %v after %d decisions; want the refusal, decided once", err, decisions)
		}
	})
}
