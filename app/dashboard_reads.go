package app

import (
	"context"
	"fmt"
	"time"

	"github.com/partnergiving/giving/eventlog/delivery"
)

// Reads the partner's dashboard shows that no API route answers: the
// newest events, one enrollment's events, and the day's delivery counts.
// Each reads only the partner's own records.

// LatestEvents lists the partner's newest public events, newest first, as
// stored envelopes (what the feed and webhooks carry).
func (s *Service) LatestEvents(partner string, limit int) ([][]byte, error) {
	items, err := s.store.LatestFeed(partner, limit)
	if err != nil {
		return nil, fmt.Errorf("latest events of %s: %w", partner, err)
	}
	out := make([][]byte, len(items))
	for i, it := range items {
		out[i] = it.Data
	}
	return out, nil
}

// EnrollmentEvents lists the public events of one of the partner's
// enrollments, oldest first, as stored envelopes: the enrollment's own
// events in the ledger, whatever their number.
func (s *Service) EnrollmentEvents(ctx context.Context, partner, id string) ([][]byte, error) {
	if _, err := s.Enrollment(partner, id); err != nil {
		return nil, err
	}
	var out [][]byte
	filter := s.ledger.Subjects().Aggregate(partner, id)
	for after := uint64(0); ; {
		recs, more, err := s.ledger.Read(ctx, filter, after, 256)
		if err != nil {
			return nil, fmt.Errorf("events of enrollment %s: %w", id, err)
		}
		for _, r := range recs {
			if r.Public {
				out = append(out, r.Data)
			}
			after = r.Seq
		}
		if more == 0 || len(recs) == 0 {
			return out, nil
		}
	}
}

// DeliveryCount is how many of the partner's webhook delivery attempts
// ended one way in one hour.
type DeliveryCount = delivery.HourCount

// DeliveriesByHour lists the partner's delivery attempts of the 24 hours up
// to now, by hour (UTC) and outcome, oldest hour first.
func (s *Service) DeliveriesByHour(ctx context.Context, partner string, now time.Time) ([]DeliveryCount, error) {
	if s.counts == nil {
		return nil, nil
	}
	first := now.UTC().Truncate(time.Hour).Add(-23 * time.Hour)
	return s.counts.Since(ctx, partner, first)
}
