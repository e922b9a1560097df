package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog"
	"github.com/partnergiving/giving/eventlog/eventlogtest"
	"github.com/partnergiving/giving/httpapi/apitest"
)

// eventPage is a GET /v1/events answer with each item kept as raw bytes.
type eventPage struct {
	Data       []json.RawMessage `json:"data"`
	NextCursor string            `json:"next_cursor"`
	HasMore    bool              `json:"has_more"`
}

// envelope is the decoded shape of one feed item.
type envelope struct {
	EventID    string          `json:"event_id"`
	EventType  string          `json:"event_type"`
	OccurredAt string          `json:"occurred_at"`
	ChurchID   string          `json:"church_id"`
	Payload    json.RawMessage `json:"payload"`
}

func decodeEnvelope(t testing.TB, raw []byte) envelope {
	t.Helper()
	var e envelope
	if err := json.Unmarshal(raw, &e); err != nil {
		t.Fatalf("feed item %s: %v", raw, err)
	}
	return e
}

// getEvents reads one page and fails the test unless it is a 200.
func getEvents(t testing.TB, c *apitest.Client, q url.Values) eventPage {
	t.Helper()
	resp := c.Do(http.MethodGet, "/v1/events?"+q.Encode(), nil, nil)
	if resp.Status != http.StatusOK {
		t.Fatalf("GET /v1/events?%s: %d %s", q.Encode(), resp.Status, resp.Body)
	}
	var p eventPage
	resp.JSON(t, &p)
	return p
}

// drainEvents pages through the feed from cursor (empty: the start) and
// returns every item and the final cursor.
func drainEvents(t testing.TB, c *apitest.Client, q url.Values, cursor string) ([]json.RawMessage, string) {
	t.Helper()
	var items []json.RawMessage
	for pages := 0; ; pages++ {
		if pages > 20000 {
			t.Fatal("the feed never stopped saying has_more")
		}
		pq := url.Values{}
		for k, v := range q {
			pq[k] = v
		}
		if cursor != "" {
			pq.Set("since_cursor", cursor)
		}
		p := getEvents(t, c, pq)
		if p.NextCursor == "" {
			t.Fatal("next_cursor is empty")
		}
		if len(p.Data) == 0 && p.HasMore {
			t.Fatal("an empty page says has_more")
		}
		items = append(items, p.Data...)
		cursor = p.NextCursor
		if !p.HasMore {
			return items, cursor
		}
	}
}

// sameRecords fails unless items are exactly recs' envelopes, byte for
// byte, in order.
func sameRecords(t testing.TB, what string, items []json.RawMessage, recs []eventlog.Record) {
	t.Helper()
	if len(items) != len(recs) {
		t.Fatalf("%s: feed gave %d events, want %d", what, len(items), len(recs))
	}
	for i := range recs {
		if !bytes.Equal(items[i], recs[i].Data) {
			t.Fatalf("%s: item %d is\n%s\nwant (seq %d)\n%s", what, i, items[i], recs[i].Seq, recs[i].Data)
		}
	}
}

func recordsOf(recs []eventlog.Record, partner string, types ...string) []eventlog.Record {
	var out []eventlog.Record
	for _, r := range recs {
		if r.Partner != partner {
			continue
		}
		if len(types) == 0 || contains(types, r.Type) {
			out = append(out, r)
		}
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// internalRecords is the partner's internal events: onboarding and church
// imports.
func internalRecords(t testing.TB, ts *testStack, partner string) []eventlog.Record {
	t.Helper()
	var out []eventlog.Record
	for _, agg := range []string{partner, domain.ChurchCatalogue} {
		recs, _, err := ts.Ledger.Read(context.Background(), ts.Ledger.Subjects().Aggregate(partner, agg), 0, 1000)
		if err != nil {
			t.Fatalf("read internal events: %v", err)
		}
		out = append(out, recs...)
	}
	for _, r := range out {
		if r.Public {
			t.Fatalf("expected internal events only, got %s", r.Subject)
		}
	}
	if len(out) == 0 {
		t.Fatal("the partner has no internal events; the isolation check would prove nothing")
	}
	return out
}

// 10,000 events across three partners and three types: every partner pages
// through with small and large pages, with and without type filters, and
// sees exactly its own public events, each once, in stream order, byte for
// byte as stored. The ledger is a NATS server of its own that, like a
// cluster, does not sync each write: what is paged is the same, and the
// 10,000 appends take seconds instead of most of a minute of fsyncs.
func TestFeedPagesThroughTenThousandEvents(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("appends 10,000 events")
	}
	ts := startStack(t, withNATSURL(eventlogtest.StartServer(t)))
	clients := map[string]*apitest.Client{}
	var who []feedProducer
	for range 3 {
		c, p := ts.feedPartner(t, 3)
		clients[p.Partner] = c
		who = append(who, p)
	}
	// Uneven shares and interleaved types: per 3 jobs, 4 events.
	share := []int{0, 0, 1, 0, 2, 1, 0}
	var jobs []produceJob
	for n := 0; n < 7500; n++ {
		jobs = append(jobs, produceJob{who: who[share[n%len(share)]], kind: []int{jobCreateActivate, jobDeposit, jobCreate}[n%3], n: n})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	start := time.Now()
	recs, err := produce(ctx, ts.Ledger, jobs, 24)
	if err != nil {
		t.Fatalf("produce: %v", err)
	}
	t.Logf("appended %d events in %s", len(recs), time.Since(start).Round(time.Millisecond))
	if len(recs) != 10000 {
		t.Fatalf("produced %d events, want 10000", len(recs))
	}

	filters := []struct {
		name  string
		types []string
	}{
		{"all", nil},
		{"one type", []string{"enrollment.activated"}},
		{"two types", []string{"deposit.received", "enrollment.created"}},
	}
	// Partners and filters page in parallel: checking every answer against
	// the OpenAPI document costs a few milliseconds a page.
	for i, p := range who {
		key := clients[p.Partner].Key
		for _, f := range filters {
			t.Run(fmt.Sprintf("partner %d/%s", i, f.name), func(t *testing.T) {
				t.Parallel()
				c := &apitest.Client{TB: t, Base: ts.URL, Key: key}
				want := recordsOf(recs, p.Partner, f.types...)
				if len(want) == 0 {
					t.Fatalf("no %s events", f.name)
				}
				for _, limit := range []int{7, 1000} {
					q := url.Values{"limit": {fmt.Sprint(limit)}}
					if f.types != nil {
						q.Set("type", strings.Join(f.types, ","))
					}
					items, last := drainEvents(t, c, q, "")
					sameRecords(t, fmt.Sprintf("limit %d", limit), items, want)
					if f.types == nil {
						checkNoInternal(t, items, internalRecords(t, ts, p.Partner))
					}
					// At the end, polling again gives nothing and the same cursor.
					q.Set("since_cursor", last)
					if again := getEvents(t, c, q); len(again.Data) != 0 || again.HasMore || again.NextCursor != last {
						t.Fatalf("poll past the end: %d events, has_more %v, cursor changed %v", len(again.Data), again.HasMore, again.NextCursor != last)
					}
				}
			})
		}
	}
}

func checkNoInternal(t testing.TB, items []json.RawMessage, internal []eventlog.Record) {
	t.Helper()
	ids := map[string]bool{}
	for _, it := range items {
		e := decodeEnvelope(t, it)
		if spec, ok := domain.EventTypeSpec(e.EventType); !ok || !spec.Public {
			t.Fatalf("the feed shows non-public event type %q", e.EventType)
		}
		if ids[e.EventID] {
			t.Fatalf("event %s appears twice", e.EventID)
		}
		ids[e.EventID] = true
	}
	for _, r := range internal {
		ev, err := r.Event()
		if err != nil {
			t.Fatal(err)
		}
		if ids[ev.ID] {
			t.Fatalf("internal event %s (%s) is in the feed", ev.ID, ev.Type)
		}
	}
}

// Each feed item is the ledger record's stored envelope byte for byte, so a
// webhook that sends the stored bytes carries exactly what the feed shows,
// even for text that a JSON encoder would escape.
func TestFeedItemsAreTheStoredBytes(t *testing.T) {
	t.Parallel()
	ts := startStack(t)
	c, p := ts.feedPartner(t, 1)
	ctx := context.Background()
	church := p.Churches[0]
	created, err := createEnrollment(ctx, ts.Ledger, p.Partner, church)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := activateEnrollment(ctx, ts.Ledger, p.Partner, created.Aggregate); err != nil {
		t.Fatal(err)
	}
	if _, err := receiveDeposit(ctx, ts.Ledger, p.Partner, church, 12_50, `<b>&"quoted" é 日本 \ `+"\u2028"); err != nil {
		t.Fatal(err)
	}
	stored, _, err := ts.Ledger.Read(ctx, ts.Ledger.Subjects().Public(p.Partner, ""), 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	page := getEvents(t, c, url.Values{})
	sameRecords(t, "feed", page.Data, stored)
	// The envelope is encoded once, when it is built (HTML characters as
	// is, U+2028 escaped); the feed must neither undo nor redo that.
	if !bytes.Contains(page.Data[2], []byte(`"trace":"<b>&\"quoted\" é 日本 \\ \u2028"`)) {
		t.Fatalf("trace was re-encoded: %s", page.Data[2])
	}

	stamp := regexp.MustCompile(`^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$`)
	wantTypes := []string{"enrollment.created", "enrollment.activated", "deposit.received"}
	seen := map[string]bool{}
	for i, raw := range page.Data {
		e := decodeEnvelope(t, raw)
		if e.EventType != wantTypes[i] || e.ChurchID != church || !stamp.MatchString(e.OccurredAt) ||
			!domain.ValidID(domain.PrefixEvent, e.EventID) || seen[e.EventID] {
			t.Errorf("item %d: %s", i, raw)
		}
		seen[e.EventID] = true
	}
	if got := string(decodeEnvelope(t, page.Data[1]).Payload); got != `{"enrollment_id":"`+created.Aggregate+`"}` {
		t.Errorf("enrollment.activated payload = %s", got)
	}
	// Field order is part of the bytes: the envelope always starts the same.
	if !bytes.HasPrefix(page.Data[0], []byte(`{"event_id":"evt_`)) {
		t.Errorf("envelope field order: %s", page.Data[0])
	}
}

// Cursors stay valid across a restart, an online projection rebuild, and an
// offline `giving replay` of the stopped instance's data directory.
func TestFeedCursorSurvivesRestartAndReplay(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ts := startStack(t, withDir(dir))
	c, p := ts.feedPartner(t, 2)
	ctx := context.Background()
	var recs []eventlog.Record
	appendN := func(ts *testStack, n int) {
		t.Helper()
		for i := range n {
			rec, err := receiveDeposit(ctx, ts.Ledger, p.Partner, p.Churches[i%2], domain.Hundredths(100+len(recs)), fmt.Sprint("t", len(recs)))
			if err != nil {
				t.Fatal(err)
			}
			recs = append(recs, rec)
		}
	}
	appendN(ts, 5)
	page := getEvents(t, c, url.Values{"limit": {"3"}})
	sameRecords(t, "first page", page.Data, recs[:3])
	mid := page.NextCursor
	_, end := drainEvents(t, c, url.Values{}, mid)

	// Restart on the same data directory.
	ts.stop()
	ts = startStack(t, withDir(dir))
	c = &apitest.Client{TB: t, Base: ts.URL, Key: c.Key}
	items, _ := drainEvents(t, c, url.Values{}, mid)
	sameRecords(t, "after restart, from the stored cursor", items, recs[3:])
	appendN(ts, 2)
	items, _ = drainEvents(t, c, url.Values{}, end)
	sameRecords(t, "after restart, new events", items, recs[5:])

	// Online rebuild, as `giving replay` asks a running instance to do.
	if err := ts.Projector.Rebuild(ctx, nil); err != nil {
		t.Fatalf("rebuild: %v", err)
	}
	items, _ = drainEvents(t, c, url.Values{}, mid)
	sameRecords(t, "after an online rebuild", items, recs[3:])

	// Offline `giving replay` of the stopped instance's projections.
	ts.stop()
	if r := runCLI(t, nil, "replay", "--data", dir); r.Code != 0 {
		t.Fatalf("giving replay: exit %d\n%s", r.Code, r.Stderr)
	}
	ts = startStack(t, withDir(dir))
	c = &apitest.Client{TB: t, Base: ts.URL, Key: c.Key}
	items, last := drainEvents(t, c, url.Values{}, mid)
	sameRecords(t, "after giving replay", items, recs[3:])
	items, again := drainEvents(t, c, url.Values{}, last)
	if len(items) != 0 || again != last {
		t.Fatalf("after the end: %d events, same cursor %v", len(items), again == last)
	}
}

// Any cursor this service did not issue to this partner for this list is a
// 400 invalid-cursor: altered, cut short, another partner's, random, or
// built by hand.
func TestFeedRefusesForeignAndForgedCursors(t *testing.T) {
	t.Parallel()
	ts := startStack(t)
	a, pa := ts.feedPartner(t, 1)
	b, _ := ts.feedPartner(t, 1)
	ctx := context.Background()
	for range 3 {
		if _, err := createEnrollment(ctx, ts.Ledger, pa.Partner, pa.Churches[0]); err != nil {
			t.Fatal(err)
		}
	}
	page := getEvents(t, a, url.Values{"limit": {"2"}})
	valid := page.NextCursor
	if page := getEvents(t, a, url.Values{"since_cursor": {valid}}); len(page.Data) != 1 {
		t.Fatalf("the valid cursor resumed with %d events, want 1", len(page.Data))
	}
	raw, err := base64.RawURLEncoding.DecodeString(valid)
	if err != nil {
		t.Fatalf("cursor is not base64url: %v", err)
	}
	refuse := func(name string, c *apitest.Client, cursor string) {
		t.Helper()
		resp := c.Do(http.MethodGet, "/v1/events?since_cursor="+url.QueryEscape(cursor), nil, nil)
		if resp.Status != http.StatusBadRequest || resp.Map(t)["type"] != "/problems/invalid-cursor" {
			t.Errorf("%s cursor %q: %d %s", name, cursor, resp.Status, resp.Body)
		}
	}
	for i := range raw {
		for _, bit := range []byte{0x01, 0x80} {
			forged := bytes.Clone(raw)
			forged[i] ^= bit
			refuse(fmt.Sprintf("byte %d xor %#x", i, bit), a, base64.RawURLEncoding.EncodeToString(forged))
		}
	}
	for _, n := range []int{1, 2, 5, len(valid) / 2, len(valid) - 1} {
		refuse(fmt.Sprintf("truncated to %d", n), a, valid[:n])
	}
	refuse("extended", a, valid+"A")
	refuse("padded", a, valid+"==")
	refuse("another partner's", b, valid)
	own := getEvents(t, b, url.Values{}).NextCursor
	refuse("B's cursor used by A", a, own)
	for i := range 5 {
		random := make([]byte, len(raw)-i)
		_, _ = rand.Read(random)
		refuse("random", a, base64.RawURLEncoding.EncodeToString(random))
	}
	refuse("garbage", a, "not a cursor!")
	refuse("huge", a, strings.Repeat("A", 10000))
	var seq [8]byte
	binary.BigEndian.PutUint64(seq[:], 2)
	refuse("bare sequence", a, base64.RawURLEncoding.EncodeToString(seq[:]))
	refuse("decimal sequence", a, "2")
	madeUp := append([]byte{1, 'e', 8}, seq[:]...)
	refuse("made-up MAC", a, base64.RawURLEncoding.EncodeToString(append(madeUp, make([]byte, 16)...)))
	// Signed with the real key, but for another list or past the ledger's end.
	cursors := domain.NewCursors(ts.Secrets.Key("cursor"))
	refuse("a churches cursor", a, cursors.EncodeSeq(domain.CursorChurches, pa.Partner, 2))
	refuse("past the end", a, cursors.EncodeSeq(domain.CursorEvents, pa.Partner, 1<<40))
}

// Bad parameters are 422s that name the parameter.
func TestFeedValidatesParameters(t *testing.T) {
	t.Parallel()
	ts := startStack(t)
	c, _ := ts.partner(t)
	cases := map[string]string{
		"limit=0":                            "limit",
		"limit=1001":                         "limit",
		"limit=ten":                          "limit",
		"wait=31":                            "wait",
		"wait=-1":                            "wait",
		"wait=1.5":                           "wait",
		"type=enrollment.nope":               "type",
		"type=partner.created":               "type", // internal types do not exist for partners
		"type=enrollment.created,,":          "type",
		"type=enrollment.created,bogus":      "type",
		"cursor=abc":                         "cursor",
		"since_cursor=a&since_cursor=b":      "since_cursor",
		"limit=5&limit=6":                    "limit",
		"type=ENROLLMENT.CREATED":            "type",
		"type=enrollment.created&wait=later": "wait",
	}
	// The test delivery's type is enveloped like a public one but never
	// stored: it is not a feed type, alone or in a list.
	for _, query := range []string{"type=webhook_endpoint.test", "type=enrollment.created,webhook_endpoint.test", "type=" + strings.Join(append(domain.PublicEventTypes(), domain.WebhookTestEventType), ",")} {
		cases[query] = "type"
	}
	for query, field := range cases {
		resp := c.Do(http.MethodGet, "/v1/events?"+query, nil, nil)
		if resp.Status != http.StatusUnprocessableEntity || !strings.Contains(string(resp.Body), `"field":"`+field+`"`) {
			t.Errorf("%s: %d %s", query, resp.Status, resp.Body)
		}
	}
	// Accepted spellings.
	for _, query := range []string{"", "type=", "limit=1000", "wait=0", "type=enrollment.created,%20deposit.received",
		"type=enrollment.created&type=deposit.received", "type=deposit.received,enrollment.activated,enrollment.created",
		"type=" + strings.Join(domain.PublicEventTypes(), ",")} {
		if resp := c.Do(http.MethodGet, "/v1/events?"+query, nil, nil); resp.Status != http.StatusOK {
			t.Errorf("%s: %d %s", query, resp.Status, resp.Body)
		}
	}
	anon := &apitest.Client{TB: t, Base: ts.URL}
	if resp := anon.Do(http.MethodGet, "/v1/events", nil, nil); resp.Status != http.StatusUnauthorized {
		t.Errorf("no key: %d", resp.Status)
	}
}

// A long poll answers within 100 ms of a matching append, ignores appends
// that do not match, and when nothing comes answers empty with the same
// cursor.
func TestFeedLongPoll(t *testing.T) {
	// Serial: it bounds a long poll's wake-up after an append at 100 ms, a
	// latency that tests running beside it on a small machine would decide.
	if testing.Short() {
		t.Skip("long polls for seconds, one after another")
	}
	ts := startStack(t)
	c, p := ts.feedPartner(t, 1)
	_, q := ts.feedPartner(t, 1)
	ctx := context.Background()

	// Nothing to read: the wait runs out and the cursor stays.
	first := getEvents(t, c, url.Values{})
	if len(first.Data) != 0 || first.HasMore {
		t.Fatalf("new partner's feed: %+v", first)
	}
	start := time.Now()
	timedOut := getEvents(t, c, url.Values{"since_cursor": {first.NextCursor}, "wait": {"1"}})
	if waited := time.Since(start); waited < time.Second {
		t.Fatalf("wait=1 answered after %s", waited)
	}
	if len(timedOut.Data) != 0 || timedOut.HasMore || timedOut.NextCursor != first.NextCursor {
		t.Fatalf("timed-out poll: %d events, has_more %v, same cursor %v", len(timedOut.Data), timedOut.HasMore, timedOut.NextCursor == first.NextCursor)
	}
	if noCursor := getEvents(t, c, url.Values{"wait": {"1"}}); len(noCursor.Data) != 0 || noCursor.NextCursor != first.NextCursor {
		t.Fatalf("timed-out poll without a cursor: %+v", noCursor)
	}

	// A matching append wakes the poll at once; others' events, and this
	// partner's events of other types, do not end it.
	cursor := first.NextCursor
	var worst time.Duration
	for round := range 5 {
		appended := make(chan time.Time, 1)
		errc := make(chan error, 3)
		time.AfterFunc(150*time.Millisecond, func() {
			if _, err := receiveDeposit(ctx, ts.Ledger, p.Partner, p.Churches[0], 1_00, "no match"); err != nil {
				errc <- err
			}
			if _, err := createEnrollment(ctx, ts.Ledger, q.Partner, q.Churches[0]); err != nil {
				errc <- err
			}
		})
		time.AfterFunc(400*time.Millisecond, func() {
			if _, err := createEnrollment(ctx, ts.Ledger, p.Partner, p.Churches[0]); err != nil {
				errc <- err
			}
			appended <- time.Now()
		})
		start := time.Now()
		page := getEvents(t, c, url.Values{"since_cursor": {cursor}, "type": {"enrollment.created"}, "wait": {"10"}})
		done := time.Now()
		select {
		case err := <-errc:
			t.Fatalf("append: %v", err)
		default:
		}
		at := <-appended
		if len(page.Data) != 1 || decodeEnvelope(t, page.Data[0]).EventType != "enrollment.created" {
			t.Fatalf("round %d: woke with %d events", round, len(page.Data))
		}
		if done.Sub(start) < 400*time.Millisecond {
			t.Fatalf("round %d: answered after %s, before the matching append", round, done.Sub(start))
		}
		latency := done.Sub(at)
		worst = max(worst, latency)
		if latency > 100*time.Millisecond {
			t.Errorf("round %d: answered %s after the append, want at most 100ms", round, latency)
		}
		cursor = page.NextCursor
	}
	t.Logf("worst long-poll wake-up after an append: %s", worst)

	// A shutdown ends waiting polls at once, with the same cursor.
	time.AfterFunc(200*time.Millisecond, ts.API.EndLongPolls)
	start = time.Now()
	ended := getEvents(t, c, url.Values{"since_cursor": {cursor}, "type": {"enrollment.activated"}, "wait": {"30"}})
	if took := time.Since(start); took > 10*time.Second || len(ended.Data) != 0 || ended.NextCursor != cursor {
		t.Fatalf("EndLongPolls: answered after %s with %d events", took, len(ended.Data))
	}
}

// Several types are merged by stream position: the page ends where the
// merged list reaches the limit, even when no single type fills it.
func TestFeedMergesTypesInStreamOrder(t *testing.T) {
	t.Parallel()
	ts := startStack(t)
	c, p := ts.feedPartner(t, 1)
	ctx := context.Background()
	var recs []eventlog.Record
	for i := range 3 {
		created, err := createEnrollment(ctx, ts.Ledger, p.Partner, p.Churches[0])
		if err != nil {
			t.Fatal(err)
		}
		activated, err := activateEnrollment(ctx, ts.Ledger, p.Partner, created.Aggregate)
		if err != nil {
			t.Fatal(err)
		}
		dep, err := receiveDeposit(ctx, ts.Ledger, p.Partner, p.Churches[0], domain.Hundredths(100+i), "t")
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, created, activated, dep)
	}
	want := recordsOf(recs, p.Partner, "enrollment.created", "deposit.received")
	q := url.Values{"type": {"deposit.received,enrollment.created"}, "limit": {"4"}}
	first := getEvents(t, c, q)
	if !first.HasMore {
		t.Fatal("first page of 4 out of 6 says has_more false")
	}
	sameRecords(t, "first page", first.Data, want[:4])
	q.Set("since_cursor", first.NextCursor)
	second := getEvents(t, c, q)
	if second.HasMore {
		t.Fatal("last page says has_more")
	}
	sameRecords(t, "second page", second.Data, want[4:])
}

// Two instances share one ledger and master key: a cursor from one resumes
// on the other, and a long poll on one wakes for an append made through the
// other.
func TestFeedAcrossInstances(t *testing.T) {
	t.Parallel()
	natsURL := eventlogtest.StartServer(t)
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	master := withMasterKey(fmt.Sprintf("%x", key))
	one := startStack(t, withNATSURL(natsURL), master)
	two := startStack(t, withNATSURL(natsURL), master)
	c1, p := one.feedPartner(t, 1)
	two.waitProjected(t)
	c2 := &apitest.Client{TB: t, Base: two.URL, Key: c1.Key}
	ctx := context.Background()
	var recs []eventlog.Record
	for range 4 {
		rec, err := createEnrollment(ctx, one.Ledger, p.Partner, p.Churches[0])
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, rec)
	}
	page := getEvents(t, c1, url.Values{"limit": {"2"}})
	sameRecords(t, "instance one", page.Data, recs[:2])
	items, last := drainEvents(t, c2, url.Values{}, page.NextCursor)
	sameRecords(t, "instance two, from instance one's cursor", items, recs[2:])

	appended := make(chan eventlog.Record, 1)
	time.AfterFunc(200*time.Millisecond, func() {
		rec, err := receiveDeposit(ctx, one.Ledger, p.Partner, p.Churches[0], 5_00, "cross")
		if err != nil {
			t.Error(err)
		}
		appended <- rec
	})
	woke := getEvents(t, c2, url.Values{"since_cursor": {last}, "wait": {"10"}})
	sameRecords(t, "long poll on instance two", woke.Data, []eventlog.Record{<-appended})
}
