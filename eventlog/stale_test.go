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
// leader. A decision to append nothing cannot be caught by the conditional
// append, so Execute asks the leader whether the history was whole and, if
// not, decides again. Here the first decision's history misses an event
// appended behind its back, as a lagging replica's would.
func TestNothingToAppendIsDecidedOnTheWholeHistory(t *testing.T) {
	cluster := eventlogtest.StartCluster(t, filepath.Join("..", "deploy", "nats"))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l, err := eventlog.Open(ctx, eventlog.Config{Env: domain.Sandbox, NATSURL: cluster.URL(), Replicas: 3})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	pt := createPartner(t, l, "Acme")

	var seen []int
	out, err := l.Execute(ctx, eventlog.Command{
		Partner: pt, Aggregate: pt,
		Decide: func(ctx context.Context, h eventlog.History) (*domain.Event, error) {
			seen = append(seen, len(h.Events))
			if len(seen) == 1 {
				ev := keyIssued(pt)
				if _, err := l.Append(ctx, ev, "", h.Last); err != nil {
					return nil, err
				}
			}
			return nil, nil
		},
	})
	if err != nil || out.Record != nil {
		t.Fatalf("execute: %+v, %v", out, err)
	}
	if len(seen) != 2 || seen[0] != 1 || seen[1] != 2 {
		t.Fatalf("decisions saw %v events; want [1 2]: a decision to append nothing must be made on the whole history", seen)
	}
}
