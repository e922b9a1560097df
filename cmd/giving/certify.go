package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/segmentio/ksuid"
	"golang.org/x/net/html"

	"github.com/partnergiving/giving/domain"
)

// giving certify runs the spec's certification sequence against a sandbox,
// as a partner's integration would: it only uses the public API, a local
// webhook receiver, and the hosted flow's plain HTML forms.

// certifyFlags configure a certification run.
type certifyFlags struct {
	baseURL       string
	apiKey        string
	webhookListen string
	webhookURL    string
	redirectURL   string
	timeout       time.Duration
}

func runCertify(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("giving certify", flag.ContinueOnError)
	var f certifyFlags
	fs.StringVar(&f.baseURL, "base-url", "", "the sandbox's base URL (required)")
	fs.StringVar(&f.apiKey, "api-key", "", "a sandbox API key, sk_test_... (required)")
	fs.StringVar(&f.webhookListen, "webhook-listen", "127.0.0.1:0", "address the local webhook receiver listens on")
	fs.StringVar(&f.webhookURL, "webhook-url", "", "URL the sandbox reaches the receiver at (default http://<webhook-listen>/webhooks)")
	fs.StringVar(&f.redirectURL, "redirect-url", "https://localhost/certified", "redirect_url for the donor session; must be on the partner's allowlisted origins")
	fs.DurationVar(&f.timeout, "timeout", 60*time.Second, "how long to wait for each webhook")
	if err := parseFlags(fs, args, stderr); err != nil {
		return err
	}
	if f.baseURL == "" || !strings.HasPrefix(f.apiKey, "sk_test_") {
		return usageError{"--base-url and a sandbox --api-key (sk_test_...) are required"}
	}
	c, err := newCertifier(f)
	if err != nil {
		return err
	}
	defer c.close()
	c.run(ctx)
	c.report(stdout)
	if c.failed() {
		return errors.New("certification failed")
	}
	return nil
}

// check is one line of the checklist.
type check struct {
	step   int
	name   string
	ok     bool
	reason string
}

type certifier struct {
	f      certifyFlags
	api    *http.Client
	recv   *certReceiver
	checks []check

	endpointID string
	churchIDs  []string
	sessionID  string
	enrollment string
	activated  certEvent
}

func newCertifier(f certifyFlags) (*certifier, error) {
	recv, err := startCertReceiver(f.webhookListen)
	if err != nil {
		return nil, err
	}
	if f.webhookURL == "" {
		f.webhookURL = "http://" + recv.addr + "/webhooks"
	}
	f.baseURL = strings.TrimRight(f.baseURL, "/")
	return &certifier{f: f, api: &http.Client{Timeout: 30 * time.Second}, recv: recv}, nil
}

func (c *certifier) pass(step int, name, detail string) {
	c.checks = append(c.checks, check{step: step, name: name, ok: true, reason: detail})
}

func (c *certifier) fail(step int, name string, err error) {
	c.checks = append(c.checks, check{step: step, name: name, reason: err.Error()})
}

func (c *certifier) failed() bool {
	for _, ch := range c.checks {
		if !ch.ok {
			return true
		}
	}
	return len(c.checks) == 0
}

func (c *certifier) report(w io.Writer) {
	fmt.Fprintf(w, "Certification against %s\n\n", c.f.baseURL)
	for _, ch := range c.checks {
		mark := "PASS"
		if !ch.ok {
			mark = "FAIL"
		}
		fmt.Fprintf(w, "[%s] %d. %s", mark, ch.step, ch.name)
		if ch.reason != "" {
			fmt.Fprintf(w, ": %s", ch.reason)
		}
		fmt.Fprintln(w)
	}
	if c.failed() {
		fmt.Fprintln(w, "\nResult: FAILED")
		return
	}
	fmt.Fprintln(w, "\nResult: CERTIFIED")
}

// run goes through the six steps, stopping at the first that fails, since
// each builds on the one before.
func (c *certifier) run(ctx context.Context) {
	steps := []struct {
		n    int
		name string
		do   func(context.Context) (string, error)
	}{
		{1, "Register a webhook endpoint and receive a signed test delivery", c.stepEndpoint},
		{2, "Import churches and keep their ids", c.stepImport},
		{3, "Complete the hosted flow with a seed donor; enrollment.created arrives on the webhook", c.stepFlow},
		{4, "Simulate payroll-connected; enrollment.activated arrives on the webhook", c.stepActivate},
		{5, "Read the feed for enrollment.activated and poll on with the stored cursor", c.stepFeed},
		{6, "Deduplicate by event_id across retries and channels", c.stepDedup},
	}
	for _, s := range steps {
		detail, err := s.do(ctx)
		if err != nil {
			c.fail(s.n, s.name, err)
			return
		}
		c.pass(s.n, s.name, detail)
	}
}

// close deletes what the run registered and stops the receiver.
func (c *certifier) close() {
	if c.endpointID != "" {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _, _ = c.call(ctx, http.MethodDelete, "/v1/webhook_endpoints/"+c.endpointID, nil)
	}
	c.recv.close()
}

// call sends an API request; POSTs carry a fresh Idempotency-Key.
func (c *certifier) call(ctx context.Context, method, path string, body any) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.f.baseURL+path, rd)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.f.apiKey)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if method == http.MethodPost {
		req.Header.Set("Idempotency-Key", "certify-"+ksuid.New().String())
	}
	resp, err := c.api.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	return resp.StatusCode, data, err
}

// callJSON sends a request, requires status want, and decodes the answer.
func (c *certifier) callJSON(ctx context.Context, method, path string, body any, want int, out any) error {
	code, data, err := c.call(ctx, method, path, body)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	if code != want {
		return fmt.Errorf("%s %s answered %d, want %d: %s", method, path, code, want, firstLine(data))
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	return nil
}

func firstLine(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

func (c *certifier) stepEndpoint(ctx context.Context) (string, error) {
	var ep struct {
		ID     string `json:"id"`
		Secret string `json:"secret"`
	}
	if err := c.callJSON(ctx, http.MethodPost, "/v1/webhook_endpoints", map[string]any{"url": c.f.webhookURL, "event_types": []string{"*"}}, http.StatusCreated, &ep); err != nil {
		return "", err
	}
	c.endpointID = ep.ID
	if !strings.HasPrefix(ep.Secret, "whsec_") {
		return "", fmt.Errorf("the endpoint's secret %q does not start with whsec_", ep.Secret)
	}
	c.recv.setSecret(ep.Secret)
	var test struct {
		Delivered bool `json:"delivered"`
	}
	if err := c.callJSON(ctx, http.MethodPost, "/v1/webhook_endpoints/"+ep.ID+"/test", nil, http.StatusOK, &test); err != nil {
		return "", err
	}
	if !test.Delivered {
		return "", errors.New("the test delivery answered delivered: false")
	}
	ev, err := c.recv.await(ctx, c.f.timeout, func(e certEvent) bool { return e.Type == "webhook_endpoint.test" })
	if err != nil {
		return "", fmt.Errorf("no signed test delivery reached the receiver: %w", err)
	}
	return fmt.Sprintf("endpoint %s, test event %s verified", ep.ID, ev.ID), nil
}

func (c *certifier) stepImport(ctx context.Context) (string, error) {
	var out struct {
		Results []struct {
			Status string `json:"status"`
			Church *struct {
				ID string `json:"id"`
			} `json:"church"`
		} `json:"results"`
	}
	body := map[string]any{"churches": []map[string]string{{"name": "Certification Church A"}, {"name": "Certification Church B"}}}
	if err := c.callJSON(ctx, http.MethodPost, "/v1/churches/import", body, http.StatusOK, &out); err != nil {
		return "", err
	}
	for i, r := range out.Results {
		if r.Status != "created" || r.Church == nil {
			return "", fmt.Errorf("row %d was %s", i, r.Status)
		}
		c.churchIDs = append(c.churchIDs, r.Church.ID)
	}
	if len(c.churchIDs) != 2 {
		return "", fmt.Errorf("%d results for 2 rows", len(out.Results))
	}
	return strings.Join(c.churchIDs, ", "), nil
}

func (c *certifier) stepFlow(ctx context.Context) (string, error) {
	var s struct {
		ID  string `json:"id"`
		URL string `json:"url"`
	}
	body := map[string]any{"church_id": c.churchIDs[0], "donor_phone": "+12025550100", "mode": "pct", "value": 3, "redirect_url": c.f.redirectURL}
	if err := c.callJSON(ctx, http.MethodPost, "/v1/donor_sessions", body, http.StatusCreated, &s); err != nil {
		return "", err
	}
	c.sessionID = s.ID
	if err := completeFlow(ctx, s.URL); err != nil {
		return "", fmt.Errorf("hosted flow: %w", err)
	}
	ev, err := c.recv.await(ctx, c.f.timeout, func(e certEvent) bool {
		return e.Type == "enrollment.created" && e.Payload["donor_session_id"] == s.ID
	})
	if err != nil {
		return "", fmt.Errorf("enrollment.created did not arrive: %w", err)
	}
	c.enrollment, _ = ev.Payload["enrollment_id"].(string)
	return fmt.Sprintf("session %s, enrollment %s", s.ID, c.enrollment), nil
}

func (c *certifier) stepActivate(ctx context.Context) (string, error) {
	var sim struct {
		StatusCode int `json:"status_code"`
	}
	body := map[string]string{"enrollment_id": c.enrollment, "church_id": c.churchIDs[0]}
	if err := c.callJSON(ctx, http.MethodPost, "/sandbox/simulate/payroll-connected", body, http.StatusOK, &sim); err != nil {
		return "", err
	}
	if sim.StatusCode/100 != 2 {
		return "", fmt.Errorf("the webhook edge answered %d", sim.StatusCode)
	}
	ev, err := c.recv.await(ctx, c.f.timeout, func(e certEvent) bool {
		return e.Type == "enrollment.activated" && e.Payload["enrollment_id"] == c.enrollment
	})
	if err != nil {
		return "", fmt.Errorf("enrollment.activated did not arrive: %w", err)
	}
	c.activated = ev
	return "event " + ev.ID, nil
}

type feedPage struct {
	Data       []json.RawMessage `json:"data"`
	NextCursor string            `json:"next_cursor"`
	HasMore    bool              `json:"has_more"`
}

func (c *certifier) stepFeed(ctx context.Context) (string, error) {
	cursor, found := "", false
	for {
		path := "/v1/events?type=enrollment.activated&limit=1000"
		if cursor != "" {
			path += "&since_cursor=" + url.QueryEscape(cursor)
		}
		var page feedPage
		if err := c.callJSON(ctx, http.MethodGet, path, nil, http.StatusOK, &page); err != nil {
			return "", err
		}
		for _, raw := range page.Data {
			var e certEvent
			if err := json.Unmarshal(raw, &e); err != nil {
				return "", fmt.Errorf("feed item: %w", err)
			}
			if e.ID == c.activated.ID {
				found = true
				c.recv.accept(e)
				if !bytes.Equal(raw, c.activated.raw) {
					return "", errors.New("the feed item differs from the webhook body for the same event")
				}
			}
		}
		if page.NextCursor == "" {
			return "", errors.New("the feed answered without next_cursor")
		}
		cursor = page.NextCursor
		if !page.HasMore {
			break
		}
	}
	if !found {
		return "", fmt.Errorf("event %s is not on the feed", c.activated.ID)
	}
	// Poll on from the stored cursor: nothing new, and the same position.
	var again feedPage
	if err := c.callJSON(ctx, http.MethodGet, "/v1/events?type=enrollment.activated&since_cursor="+url.QueryEscape(cursor), nil, http.StatusOK, &again); err != nil {
		return "", err
	}
	if len(again.Data) != 0 || again.NextCursor != cursor {
		return "", errors.New("polling with the stored cursor did not resume after it")
	}
	return "found " + c.activated.ID + "; cursor stored and polled", nil
}

func (c *certifier) stepDedup(ctx context.Context) (string, error) {
	// enrollment.activated came twice, pushed and pulled, with one event_id;
	// the integration acts on it once. Webhook retries are dropped the same
	// way.
	deliveries, unique, duplicates := c.recv.counts()
	if duplicates == 0 {
		return "", fmt.Errorf("event %s, read from the feed after its webhook, was not recognised as a duplicate", c.activated.ID)
	}
	return fmt.Sprintf("%d webhook deliveries and 1 feed read of %d distinct events; %d duplicates were no-ops", deliveries, unique, duplicates), nil
}

// certEvent is an envelope as the receiver saw it.
type certEvent struct {
	ID      string         `json:"event_id"`
	Type    string         `json:"event_type"`
	Payload map[string]any `json:"payload"`
	raw     []byte
}

// certReceiver is the local webhook endpoint. It verifies every delivery by the
// spec's rules and deduplicates by event_id, as an integration must.
type certReceiver struct {
	addr string
	srv  *http.Server

	mu         sync.Mutex
	secret     []byte
	seen       map[string]certEvent
	deliveries int
	duplicates int
	arrived    chan struct{}
}

func startCertReceiver(listen string) (*certReceiver, error) {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, fmt.Errorf("webhook receiver: %w", err)
	}
	r := &certReceiver{addr: ln.Addr().String(), seen: map[string]certEvent{}, arrived: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /webhooks", r.handle)
	r.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = r.srv.Serve(ln) }()
	return r, nil
}

func (r *certReceiver) close() { _ = r.srv.Close() }

func (r *certReceiver) setSecret(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.secret = []byte(s)
}

func (r *certReceiver) handle(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(io.LimitReader(req.Body, 1<<20))
	if err != nil {
		http.Error(w, "read", http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	secret := r.secret
	r.mu.Unlock()
	if secret == nil || domain.VerifySignature(req.Header.Get("Service-Signature"), secret, body, time.Now()) != nil {
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	}
	var e certEvent
	if err := json.Unmarshal(body, &e); err != nil || e.ID == "" {
		http.Error(w, "bad envelope", http.StatusBadRequest)
		return
	}
	e.raw = body
	r.mu.Lock()
	r.deliveries++
	r.mu.Unlock()
	r.accept(e)
	w.WriteHeader(http.StatusOK)
}

// accept is the integration acting on an event, from either channel: once
// per event_id; a repeat is counted and otherwise ignored.
func (r *certReceiver) accept(e certEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.seen[e.ID]; dup {
		r.duplicates++
		return
	}
	r.seen[e.ID] = e
	close(r.arrived)
	r.arrived = make(chan struct{})
}

// await waits for a verified event matching match.
func (r *certReceiver) await(ctx context.Context, timeout time.Duration, match func(certEvent) bool) (certEvent, error) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		r.mu.Lock()
		for _, e := range r.seen {
			if match(e) {
				r.mu.Unlock()
				return e, nil
			}
		}
		arrived := r.arrived
		r.mu.Unlock()
		select {
		case <-arrived:
		case <-deadline.C:
			return certEvent{}, fmt.Errorf("nothing after %s", timeout)
		case <-ctx.Done():
			return certEvent{}, ctx.Err()
		}
	}
}

func (r *certReceiver) counts() (deliveries, unique, duplicates int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.deliveries, len(r.seen), r.duplicates
}

// completeFlow walks the hosted flow through its HTML forms as a browser
// without JavaScript would, with the sandbox's seed answers: code 000000,
// both consents, the first payroll provider, user_good / pass_good.
func completeFlow(ctx context.Context, start string) error {
	jar, _ := cookiejar.New(nil)
	hc := &http.Client{Jar: jar, Timeout: 30 * time.Second}
	page, at, err := fetch(ctx, hc, http.MethodGet, start, nil)
	if err != nil {
		return err
	}
	for range 30 {
		doc, err := html.Parse(bytes.NewReader(page))
		if err != nil {
			return err
		}
		if findByID(doc, "return") != nil {
			return nil // the confirmation page, with the way back
		}
		form := pickForm(doc)
		if form == nil {
			if isWaitPage(doc) { // waiting for identity verification
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(time.Second):
				}
				page, at, err = fetch(ctx, hc, http.MethodGet, at, nil)
				if err != nil {
					return err
				}
				continue
			}
			return fmt.Errorf("stopped at %q", heading(doc))
		}
		action, err := url.Parse(attr(form, "action"))
		if err != nil {
			return err
		}
		base, _ := url.Parse(at)
		page, at, err = fetch(ctx, hc, http.MethodPost, base.ResolveReference(action).String(), fillForm(form))
		if err != nil {
			return err
		}
	}
	return errors.New("the flow did not finish")
}

func fetch(ctx context.Context, hc *http.Client, method, target string, form url.Values) ([]byte, string, error) {
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequestWithContext(ctx, method, target, body)
	if err != nil {
		return nil, "", err
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, "", err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, "", fmt.Errorf("%s %s: %d", method, resp.Request.URL.Path, resp.StatusCode)
	}
	return data, resp.Request.URL.String(), nil
}

// pickForm chooses the step's main form: entering a code before asking for
// one, then consent, then payroll.
func pickForm(doc *html.Node) *html.Node {
	forms := findAll(doc, "form")
	for _, suffix := range []string{"/verify", "/consent", "/payroll", "/code"} {
		for _, f := range forms {
			if strings.EqualFold(attr(f, "method"), "post") && strings.HasSuffix(attr(f, "action"), suffix) {
				if suffix == "/verify" && !hasInputNamed(doc, "code") {
					continue
				}
				return f
			}
		}
	}
	return nil
}

// fillForm answers a form's fields the way the seed donor does.
func fillForm(form *html.Node) url.Values {
	v := url.Values{}
	answers := map[string]string{"code": "000000", "username": "user_good", "password": "pass_good"}
	for _, in := range findAll(form, "input") {
		name := attr(in, "name")
		if name == "" {
			continue
		}
		switch attr(in, "type") {
		case "hidden":
			v.Set(name, attr(in, "value"))
		case "checkbox":
			v.Set(name, attr(in, "value"))
		case "radio":
			if v.Get(name) == "" {
				v.Set(name, attr(in, "value"))
			}
		default:
			if a, ok := answers[name]; ok {
				v.Set(name, a)
			}
		}
	}
	return v
}

func hasInputNamed(doc *html.Node, name string) bool {
	for _, in := range findAll(doc, "input") {
		if attr(in, "name") == name {
			return true
		}
	}
	return false
}

// isWaitPage recognises the identity-wait pages by their "Check again" link.
func isWaitPage(doc *html.Node) bool {
	return findByID(doc, "check-again") != nil
}

func heading(doc *html.Node) string {
	if h := findAll(doc, "h1"); len(h) > 0 {
		return strings.TrimSpace(text(h[0]))
	}
	return "a page without a heading"
}

func findAll(n *html.Node, tag string) []*html.Node {
	var out []*html.Node
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode && n.Data == tag {
			out = append(out, n)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(n)
	return out
}

func findByID(n *html.Node, id string) *html.Node {
	if n.Type == html.ElementNode && attr(n, "id") == id {
		return n
	}
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		if f := findByID(c, id); f != nil {
			return f
		}
	}
	return nil
}

func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

func text(n *html.Node) string {
	if n.Type == html.TextNode {
		return n.Data
	}
	var b strings.Builder
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		b.WriteString(text(c))
	}
	return b.String()
}
