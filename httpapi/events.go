package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog"
)

// The event feed, GET /v1/events, reads the authenticated partner's public
// events straight from the ledger, oldest first. Its cursor is the stream
// sequence of the last event a page held, wrapped by the cursor codec, so it
// stays valid across restarts, projection rebuilds and instances. Partner and
// type are filtered on ledger subjects, which the JetStream server indexes,
// and each item is the event's stored envelope, byte for byte what a webhook
// carries.

const (
	feedDefaultLimit = 100
	feedMaxLimit     = 1000
	feedMaxWait      = 30 // seconds
)

// feedParams are the query parameters the feed takes. Any other is refused,
// so that a misspelt since_cursor cannot silently send a poller back to the
// first event.
var feedParams = map[string]bool{"type": true, "since_cursor": true, "limit": true, "wait": true}

// feedQuery is a parsed feed request.
type feedQuery struct {
	// types are the requested event types, sorted; empty means every public
	// type.
	types []string
	after uint64
	limit int
	wait  time.Duration
}

func (s *Server) listEvents(w http.ResponseWriter, r *http.Request) {
	pid := partnerID(r)
	q, err := s.parseFeedQuery(r, pid)
	if err != nil {
		writeError(w, r, err)
		return
	}
	recs, more, err := s.pollFeed(r.Context(), pid, q)
	if r.Context().Err() != nil {
		return // the client left; nobody reads an answer
	}
	if err != nil {
		writeError(w, r, err)
		return
	}
	next := q.after
	if n := len(recs); n > 0 {
		next = recs[n-1].Seq
	}
	writeJSONBytes(w, http.StatusOK, feedPage(recs, s.cursors.EncodeSeq(eventlog.CursorEvents, pid, next), more))
}

func (s *Server) parseFeedQuery(r *http.Request, pid string) (feedQuery, error) {
	values := r.URL.Query()
	var v domain.Validation
	names := make([]string, 0, len(values))
	for name := range values {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		switch {
		case !feedParams[name]:
			v.Add(name, "is not a parameter of this list; it takes type, since_cursor, limit and wait")
		case name != "type" && len(values[name]) > 1:
			v.Add(name, "must be given once")
		}
	}
	q := feedQuery{types: feedTypes(values["type"], &v)}
	limit, err := queryLimit(r, feedDefaultLimit, feedMaxLimit)
	var de *domain.Error
	if errors.As(err, &de) {
		v.Fields = append(v.Fields, de.Fields...)
	}
	q.limit = limit
	if raw := values.Get("wait"); raw != "" {
		n, err := strconv.Atoi(raw)
		if err != nil || n < 0 || n > feedMaxWait {
			v.Add("wait", "must be a whole number of seconds from 0 to %d", feedMaxWait)
		}
		q.wait = time.Duration(n) * time.Second
	}
	if err := v.Err(); err != nil {
		return feedQuery{}, err
	}
	if c := values.Get("since_cursor"); c != "" {
		if q.after, err = s.cursors.DecodeSeq(eventlog.CursorEvents, pid, c); err != nil {
			return feedQuery{}, errInvalidFeedCursor
		}
	}
	return q, nil
}

var errInvalidFeedCursor = domain.Errorf(domain.KindInvalid, ProblemInvalidCursor.Slug,
	"since_cursor was not issued by this service to this partner, or was altered. Pass a next_cursor exactly as returned, or omit since_cursor to start from the first event.")

// feedTypes reads the type parameter: one event type or several separated
// by commas (the parameter may also repeat). Only the feed's types
// (domain.PublicEventTypes) are accepted; internal ones and the test
// delivery's, which is never stored, are reported as unknown, like any other
// name. Asking for every feed type is the same as asking for none.
func feedTypes(vals []string, v *domain.Validation) []string {
	if strings.TrimSpace(strings.Join(vals, "")) == "" {
		return nil
	}
	seen := map[string]bool{}
	var out []string
	for _, val := range vals {
		for _, t := range strings.Split(val, ",") {
			t = strings.TrimSpace(t)
			spec, known := domain.EventTypeSpec(t)
			switch {
			case t == "" && !seen[""]:
				seen[""] = true
				v.Add("type", "holds an empty event type; separate types with single commas")
			case t == "":
			case !known || !spec.Public || spec.TestOnly:
				v.Add("type", "%q is not an event type; the event types are %s", t, strings.Join(domain.PublicEventTypes(), ", "))
			case !seen[t]:
				seen[t] = true
				out = append(out, t)
			}
		}
	}
	sort.Strings(out)
	if slices.Equal(out, domain.PublicEventTypes()) {
		return nil
	}
	return out
}

// pollFeed reads a page. With a wait, an empty page is read again each time
// the local projections apply a batch (the projector follows the whole
// ledger, so it hears writes made by any instance), until a matching event
// exists or the wait is over.
func (s *Server) pollFeed(ctx context.Context, pid string, q feedQuery) ([]eventlog.Record, bool, error) {
	var timeout <-chan time.Time
	if q.wait > 0 {
		t := time.NewTimer(q.wait)
		defer t.Stop()
		timeout = t.C
	}
	for first := true; ; first = false {
		// Take the channel before reading, so an event applied between the
		// read and the wait still wakes this request.
		changed := s.store.Changed()
		recs, more, err := s.readFeed(ctx, pid, q)
		if err != nil || len(recs) > 0 {
			return recs, more, err
		}
		if first && q.after > 0 {
			if err := s.checkFeedPosition(ctx, q.after); err != nil {
				return nil, false, err
			}
		}
		if timeout == nil {
			return nil, false, nil
		}
		select {
		case <-changed:
		case <-timeout:
			return nil, false, nil
		case <-s.polls.ended():
			return nil, false, nil
		case <-ctx.Done():
			return nil, false, ctx.Err()
		}
	}
}

// checkFeedPosition refuses a cursor that marks a position past the end of
// the ledger. Only a ledger wiped and recreated under the same master key can
// produce one, and a poller holding it would otherwise wait forever.
func (s *Server) checkFeedPosition(ctx context.Context, after uint64) error {
	last, err := s.ledger.LastSeq(ctx)
	if err != nil {
		return err
	}
	if after > last {
		return errInvalidFeedCursor
	}
	return nil
}

// readFeed returns up to q.limit of the partner's public events after
// q.after, oldest first, and whether more exist. Several types are read one
// subject filter each, limit+1 events apiece, and merged by sequence, so the
// cost follows the page whatever the other types hold.
func (s *Server) readFeed(ctx context.Context, pid string, q feedQuery) ([]eventlog.Record, bool, error) {
	subjects := s.ledger.Subjects()
	filters := []string{subjects.Public(pid, "")}
	if len(q.types) > 0 {
		filters = filters[:0]
		for _, t := range q.types {
			filters = append(filters, subjects.Public(pid, t))
		}
	}
	var recs []eventlog.Record
	more := false
	// bound is the highest sequence up to which every filter's answer is
	// complete. A filter whose answer stopped short (the page was full, or
	// the server capped the batch's size) knows nothing beyond its last
	// event, and merging past that point could skip one of its events.
	bound := uint64(math.MaxUint64)
	for _, f := range filters {
		page, pending, err := s.ledger.Read(ctx, f, q.after, q.limit+1)
		if err != nil {
			return nil, false, fmt.Errorf("feed %s after %d: %w", f, q.after, err)
		}
		recs = append(recs, page...)
		if pending > 0 || len(page) > q.limit {
			more = true
			last := q.after
			if len(page) > 0 {
				last = page[len(page)-1].Seq
			}
			bound = min(bound, last)
		}
	}
	if len(filters) > 1 {
		sort.Slice(recs, func(i, j int) bool { return recs[i].Seq < recs[j].Seq })
	}
	n := sort.Search(len(recs), func(i int) bool { return recs[i].Seq > bound })
	if n > q.limit {
		n, more = q.limit, true
	}
	recs = recs[:n]
	for _, rec := range recs {
		// The subject filter guarantees this; a breach must fail loudly
		// rather than show one partner another's or an internal event.
		if rec.Partner != pid || !rec.Public {
			return nil, false, fmt.Errorf("feed of %s: filter matched %s", pid, rec.Subject)
		}
	}
	return recs, more, nil
}

// feedPage writes the response body around the stored envelopes, which go
// out verbatim: re-encoding them (encoding/json escapes <, > and &) could
// change bytes that a webhook for the same event sends unchanged.
func feedPage(recs []eventlog.Record, next string, more bool) []byte {
	size := 64 + len(next)
	for _, r := range recs {
		size += len(r.Data) + 1
	}
	b := make([]byte, 0, size)
	b = append(b, `{"data":[`...)
	for i, r := range recs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, r.Data...)
	}
	quoted, _ := json.Marshal(next)
	b = append(b, `],"next_cursor":`...)
	b = append(b, quoted...)
	b = append(b, `,"has_more":`...)
	b = strconv.AppendBool(b, more)
	return append(b, '}')
}

// longPolls lets a shutdown end waiting feed requests at once, instead of
// holding the shutdown for up to feedMaxWait.
type longPolls struct {
	mu   sync.Mutex
	done chan struct{}
	over bool
}

func (p *longPolls) ended() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.channel()
}

func (p *longPolls) end() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.over {
		close(p.channel())
		p.over = true
	}
}

// channel makes the channel on first use; p.mu is held.
func (p *longPolls) channel() chan struct{} {
	if p.done == nil {
		p.done = make(chan struct{})
	}
	return p.done
}

// EndLongPolls answers every waiting GET /v1/events at once with what it
// has (an empty page and the same cursor), and makes later ones answer
// without waiting. Call it when the server starts shutting down.
func (s *Server) EndLongPolls() { s.polls.end() }
