package eventlog

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// setUpWindow bounds how long SetUp keeps trying when its context has no
// earlier deadline.
const setUpWindow = 2 * time.Minute

// SetUp runs create, which creates or opens a stream, a bucket or a
// consumer, until it succeeds. Several instances starting together on a
// fresh cluster race to create the same things while the cluster elects its
// leaders and learns its peers: each may see timeouts, "temporarily
// unavailable", no peers for placement yet, or a rival's creation half done.
// Every creation here is idempotent (the same configuration from every
// instance), so trying again, with a growing and jittered wait, is safe.
// Only a refusal of the request itself (a bad configuration) ends it early;
// otherwise it gives up when ctx ends or after setUpWindow, with the last
// error.
func SetUp[T any](ctx context.Context, op string, create func(context.Context) (T, error)) (T, error) {
	ctx, cancel := context.WithTimeout(ctx, setUpWindow)
	defer cancel()
	wait, limit := 50*time.Millisecond, 2*time.Second
	for {
		// A request left unanswered (concurrent creations of one stream
		// can be, while the first is placed) is asked again soon, with
		// more patience each time.
		actx, acancel := context.WithTimeout(ctx, limit)
		limit = min(2*limit, 10*time.Second)
		v, err := create(actx)
		acancel()
		if err == nil {
			return v, nil
		}
		if refused(err) {
			return v, NATSErr(op, err)
		}
		t := time.NewTimer(wait/2 + rand.N(wait))
		select {
		case <-ctx.Done():
			t.Stop()
			return v, NATSErr(op, err)
		case <-t.C:
		}
		wait = min(2*wait, 2*time.Second)
	}
}

// refused reports whether JetStream turned a creation down for what it
// asked (a 400), not for the state the cluster is in. A name already in use
// is a rival instance creating the same thing meanwhile: asking again finds
// it.
func refused(err error) bool {
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) || apiErr.Code != 400 {
		return false
	}
	switch apiErr.ErrorCode {
	case jetstream.JSErrCodeStreamNameInUse, jetstream.JSErrCodeConsumerNameExists, jetstream.JSErrCodeConsumerExists,
		jetstream.JSErrCodeConsumerAlreadyExists, jetstream.JSErrCodeConsumerCreate:
		return false
	}
	return true
}
