package httpapi

import (
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/partnergiving/giving/app"
	"github.com/partnergiving/giving/domain"
)

// The event feed, GET /v1/events: the authenticated partner's public events,
// oldest first (app.ReadFeed). Its cursor is the position of the last event a
// page held, wrapped by the cursor codec, and each item is the event's
// stored envelope, byte for byte what a webhook carries.

const (
	feedDefaultLimit = 100
	feedMaxLimit     = 1000
	feedMaxWait      = 30 // seconds
)

// LongestWait is the longest a request may ask the service to wait before it
// answers (GET /v1/events?wait=): the HTTP server's write timeout must
// exceed it.
const LongestWait = feedMaxWait * time.Second

// feedParams are the query parameters the feed takes. Any other is refused,
// so that a misspelt since_cursor cannot silently send a poller back to the
// first event.
var feedParams = map[string]bool{"type": true, "since_cursor": true, "limit": true, "wait": true}

func (s *Server) listEvents(w http.ResponseWriter, r *http.Request) {
	pid := partnerID(r)
	q, err := s.parseFeedQuery(r, pid)
	if err != nil {
		writeError(w, r, err)
		return
	}
	page, err := s.app.ReadFeed(r.Context(), pid, q)
	if r.Context().Err() != nil {
		return // the client left; nobody reads an answer
	}
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeJSONBytes(w, http.StatusOK, feedPage(page.Events, s.cursors.EncodeSeq(domain.CursorEvents, pid, page.Next), page.More))
}

func (s *Server) parseFeedQuery(r *http.Request, pid string) (app.FeedQuery, error) {
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
	q := app.FeedQuery{Types: feedTypes(values["type"], &v)}
	limit, err := queryLimit(r, feedDefaultLimit, feedMaxLimit)
	var de *domain.Error
	if errors.As(err, &de) {
		v.Fields = append(v.Fields, de.Fields...)
	}
	q.Limit = limit
	if raw := values.Get("wait"); raw != "" {
		n, err := strconv.Atoi(raw)
		if err != nil || n < 0 || n > feedMaxWait {
			v.Add("wait", "must be a whole number of seconds from 0 to %d", feedMaxWait)
		}
		q.Wait = time.Duration(n) * time.Second
	}
	if err := v.Err(); err != nil {
		return app.FeedQuery{}, err
	}
	if c := values.Get("since_cursor"); c != "" {
		if q.After, err = s.cursors.DecodeSeq(domain.CursorEvents, pid, c); err != nil {
			return app.FeedQuery{}, app.ErrFeedPosition
		}
	}
	return q, nil
}

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

// feedPage writes the response body around the stored envelopes, which go
// out verbatim: re-encoding them (encoding/json escapes <, > and &) could
// change bytes that a webhook for the same event sends unchanged.
func feedPage(events [][]byte, next string, more bool) []byte {
	size := 64 + len(next)
	for _, e := range events {
		size += len(e) + 1
	}
	b := make([]byte, 0, size)
	b = append(b, `{"data":[`...)
	for i, e := range events {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, e...)
	}
	quoted, _ := json.Marshal(next)
	b = append(b, `],"next_cursor":`...)
	b = append(b, quoted...)
	b = append(b, `,"has_more":`...)
	b = strconv.AppendBool(b, more)
	return append(b, '}')
}

// EndLongPolls answers every waiting GET /v1/events at once with what it
// has (an empty page and the same cursor), and makes later ones answer
// without waiting. Call it when the server starts shutting down.
func (s *Server) EndLongPolls() { s.app.EndLongPolls() }
