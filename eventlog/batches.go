package eventlog

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// ConsumeBatches follows a consumer and hands its messages to handle in
// batches: it waits for one message, then takes whatever else has already
// arrived, up to max, so a burst is handled in one go and a trickle without
// delay. It returns when ctx ends (with ctx's error), when the consumer
// fails, or when handle returns an error.
func ConsumeBatches(ctx context.Context, cons jetstream.Consumer, max int, handle func([]jetstream.Msg) error) error {
	it, err := cons.Messages(jetstream.PullMaxMessages(max))
	if err != nil {
		return fmt.Errorf("consume: %w", err)
	}
	defer it.Stop()
	msgs := make(chan jetstream.Msg, max)
	errc := make(chan error, 1)
	go func() {
		defer close(msgs)
		for {
			m, err := it.Next()
			if err != nil {
				errc <- err
				return
			}
			select {
			case msgs <- m:
			case <-ctx.Done():
				return
			}
		}
	}()
	for {
		batch, ok := nextBatch(ctx, msgs, max)
		if !ok {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("consume: %w", <-errc)
		}
		if err := handle(batch); err != nil {
			return err
		}
	}
}

func nextBatch(ctx context.Context, msgs <-chan jetstream.Msg, max int) ([]jetstream.Msg, bool) {
	var batch []jetstream.Msg
	select {
	case <-ctx.Done():
		return nil, false
	case m, ok := <-msgs:
		if !ok {
			return nil, false
		}
		batch = append(batch, m)
	}
	for len(batch) < max {
		select {
		case m, ok := <-msgs:
			if !ok {
				return batch, true
			}
			batch = append(batch, m)
		default:
			return batch, true
		}
	}
	return batch, true
}
