package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"slices"
	"strings"
	"time"

	"golang.org/x/net/html"
)

// Answers are what the donor enters in the hosted flow and in the
// sandbox's stand-ins of the identity vendor's page and the payroll
// vendor's widget. Empty fields take the sandbox's seed answers: code
// 000000, the identity outcome IdentityWait (for a donor who is not a seed
// donor), payroll sign-in user_good / pass_good.
type Answers struct {
	PhoneCode string
	Username  string
	Password  string
	// Identity is the outcome chosen on the identity stand-in's page:
	// passed, review, failed, or IdentityWait.
	Identity string
}

// IdentityWait is the identity stand-in's choice that decides nothing: the
// donor waits until POST /sandbox/simulate/kyc decides.
const IdentityWait = "wait"

func (a Answers) withDefaults() Answers {
	if a.PhoneCode == "" {
		a.PhoneCode = "000000"
	}
	if a.Identity == "" {
		a.Identity = IdentityWait
	}
	if a.Username == "" {
		a.Username = "user_good"
	}
	if a.Password == "" {
		a.Password = "pass_good"
	}
	return a
}

// FlowResult is where the flow ended, read from the last page's link back
// to the partner (redirect_url with session_id and status added).
type FlowResult struct {
	SessionID string
	// Status is the session's status the page reports: completed or
	// declined; or waiting, when the donor stopped at identity verification
	// (Donor.StopAtIdentity), and SessionID is not known yet.
	Status string
}

// Completed reports whether the donor reached the confirmation page.
func (r FlowResult) Completed() bool { return r.Status == "completed" }

// FlowWaiting is FlowResult.Status when the donor stopped where identity
// verification is pending.
const FlowWaiting = "waiting"

// waitEvery is how often the donor checks again while identity
// verification is pending (the pages' own script starts at 5 s; a test
// tool may be keener).
const waitEvery = time.Second

// Donor is a donor's browser without JavaScript, walking a hosted flow
// through its HTML forms: it asks for a code and enters it, ticks both
// consents, goes to the identity vendor's page and answers there (unless
// the sandbox decides a seed donor at once), opens the payroll connection
// and signs in to the sandbox's stand-in of the payroll vendor's widget, as
// the widget's own form does.
type Donor struct {
	Answers
	// Jar is the browser's cookie jar, which the flow binds the session to;
	// nil means a fresh one. Keep it (SaveJar) to continue a flow later.
	Jar http.CookieJar
	// StopAtIdentity ends the walk where the donor waits for identity
	// verification, so the identity simulator can decide it; by default
	// the donor follows the page's "Check again" link until ctx ends.
	StopAtIdentity bool
	// Progress, when set, hears each page's heading as it arrives.
	Progress func(heading string)
}

// CompleteFlow walks the hosted flow at start with the sandbox's seed
// answers (see Donor).
func CompleteFlow(ctx context.Context, start string) (FlowResult, error) {
	return (&Donor{}).CompleteFlow(ctx, start)
}

// CompleteFlow walks the flow at start. It ends at the confirmation page
// (Status completed), at the declined page (Status declined), where
// identity verification is pending if asked to (Status waiting), or with
// an error naming the page it stopped at and why.
func (d *Donor) CompleteFlow(ctx context.Context, start string) (FlowResult, error) {
	if _, err := AbsoluteURL(start); err != nil {
		return FlowResult{}, fmt.Errorf("flow url: %w", err)
	}
	jar := d.Jar
	if jar == nil {
		jar, _ = cookiejar.New(nil)
	}
	w := &walker{hc: &http.Client{Jar: jar, Timeout: 30 * time.Second}, answers: d.Answers.withDefaults(), progress: d.Progress}
	doc, err := w.get(ctx, start)
	if err != nil {
		return FlowResult{}, err
	}
	for steps := 0; ; {
		if res, ok := result(doc); ok {
			return res, nil
		}
		if isWidgetPage(doc) {
			if doc, err = w.connect(ctx, doc); err != nil {
				return FlowResult{}, err
			}
			continue
		}
		if form := pickForm(doc); form != nil && !isWaitPage(doc) {
			if steps++; steps > 20 {
				return FlowResult{}, errors.New("the flow did not finish after 20 forms")
			}
			if doc, err = w.post(ctx, form); err != nil {
				return FlowResult{}, err
			}
			if msg := pageError(doc); msg != "" {
				return FlowResult{}, fmt.Errorf("the flow refused the answers at %q: %s", heading(doc), msg)
			}
			continue
		}
		if !isWaitPage(doc) {
			return FlowResult{}, fmt.Errorf("stopped at %q, a page with no form to fill", heading(doc))
		}
		if d.StopAtIdentity {
			return FlowResult{Status: FlowWaiting}, nil
		}
		select {
		case <-ctx.Done():
			return FlowResult{}, fmt.Errorf("still at %q: %w", heading(doc), context.Cause(ctx))
		case <-time.After(waitEvery):
		}
		if doc, err = w.get(ctx, w.at); err != nil {
			return FlowResult{}, err
		}
	}
}

// FlowBase is the service's public URL, read from a donor session's url
// (<public url>/flow/<token>).
func FlowBase(flowURL string) (string, error) {
	u, err := AbsoluteURL(flowURL)
	if err == nil {
		if base, token, ok := strings.Cut(u.Path, "/flow/"); ok && token != "" && !strings.Contains(token, "/") {
			u.Path, u.RawPath, u.RawQuery, u.Fragment = base, "", "", ""
			return strings.TrimRight(u.String(), "/"), nil
		}
		err = errors.New("it does not end in /flow/<token>")
	}
	return "", fmt.Errorf("%q is not a donor session's url: %w", flowURL, err)
}

// walker is one donor's browser: a cookie jar bound to the session, and the
// address of the page it shows.
type walker struct {
	hc       *http.Client
	answers  Answers
	progress func(string)
	at       string
	last     string
}

func (w *walker) get(ctx context.Context, target string) (*html.Node, error) {
	return w.do(ctx, http.MethodGet, target, nil)
}

func (w *walker) post(ctx context.Context, form *html.Node) (*html.Node, error) {
	action, err := url.Parse(attr(form, "action"))
	if err != nil {
		return nil, fmt.Errorf("form action: %w", err)
	}
	base, _ := url.Parse(w.at)
	return w.do(ctx, http.MethodPost, base.ResolveReference(action).String(), fillForm(form, w.answers))
}

// do loads a page and parses it. A page other than 200 is an error that
// names the page's heading (never its address: the url holds the token).
func (w *walker) do(ctx context.Context, method, target string, form url.Values) (*html.Node, error) {
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequestWithContext(ctx, method, target, body)
	if err != nil {
		return nil, err
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	resp, err := w.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("the hosted flow could not be reached: %w", err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, err
	}
	doc, err := html.Parse(bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("the hosted flow answered %d: %q", resp.StatusCode, heading(doc))
	}
	w.at = resp.Request.URL.String()
	if h := heading(doc); w.progress != nil && h != w.last {
		w.progress(h)
		w.last = h
	}
	return doc, nil
}

// isWidgetPage recognises the page that opens the payroll vendor's widget
// by the vendor's script it loads.
func isWidgetPage(doc *html.Node) bool { return widgetScript(doc) != "" }

// widgetScript is the address of the payroll widget's script on the page,
// or "".
func widgetScript(doc *html.Node) string {
	for _, sc := range findAll(doc, "script") {
		if src := attr(sc, "src"); strings.HasSuffix(src, "/bridge.js") {
			return src
		}
	}
	return ""
}

// connect does in the sandbox's stand-in of the payroll vendor's widget
// what its window does in a browser: it opens the widget with the token
// the page's address carries in its fragment, signs in with the donor's
// payroll answers, and comes back to the flow's page.
func (w *walker) connect(ctx context.Context, doc *html.Node) (*html.Node, error) {
	at, err := url.Parse(w.at)
	if err != nil {
		return nil, err
	}
	frag, _ := url.ParseQuery(at.EscapedFragment())
	token := frag.Get("bridge")
	script, err := at.Parse(widgetScript(doc))
	if err != nil || token == "" {
		return nil, errors.New("the payroll connection page carries no widget token")
	}
	widget := strings.TrimSuffix(script.String(), "/bridge.js") + "/bridge/" + url.PathEscape(token)
	page, err := w.get(ctx, widget)
	if err != nil {
		return nil, err
	}
	forms := findAll(page, "form")
	if len(forms) == 0 {
		return nil, fmt.Errorf("the payroll widget shows %q and no form", heading(page))
	}
	body := fillForm(forms[0], w.answers)
	if page, err = w.do(ctx, http.MethodPost, widget, body); err != nil {
		return nil, err
	}
	if msg := pageError(page); msg != "" {
		return nil, fmt.Errorf("the payroll widget refused the sign-in: %s", msg)
	}
	at.Path, at.Fragment = strings.TrimSuffix(at.Path, "/connect"), ""
	return w.get(ctx, at.String())
}

// result reads the end of the flow from the link back to the partner,
// which carries session_id and status: the confirmation page (completed) or
// the declined page.
func result(doc *html.Node) (FlowResult, bool) {
	for _, a := range findAll(doc, "a") {
		u, err := url.Parse(attr(a, "href"))
		if err != nil {
			continue
		}
		q := u.Query()
		if id, status := q.Get("session_id"), q.Get("status"); id != "" && (status == "completed" || status == "declined") {
			return FlowResult{SessionID: id, Status: status}, true
		}
	}
	return FlowResult{}, false
}

// pickForm chooses the step's main form: entering a code before asking for
// one, then consent, going to the identity vendor and choosing there, then
// payroll.
func pickForm(doc *html.Node) *html.Node {
	forms := findAll(doc, "form")
	for _, f := range forms {
		if strings.EqualFold(attr(f, "method"), "post") && strings.Contains(attr(f, "action"), standinPath) {
			return f
		}
	}
	for _, suffix := range []string{"/verify", "/consent", "/identity", "/payroll", "/code"} {
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

// standinPath is where the sandbox serves its stand-in of the identity
// vendor's hosted page.
const standinPath = "/standin/stripe/identity/"

// fillForm answers a form's fields: hidden fields as they are, every
// checkbox ticked, the donor's answers, and the first of each other radio
// group.
func fillForm(form *html.Node, a Answers) url.Values {
	v := url.Values{}
	answers := map[string]string{"code": a.PhoneCode, "username": a.Username, "password": a.Password, "choice": a.Identity}
	for _, in := range findAll(form, "input") {
		name := attr(in, "name")
		if name == "" {
			continue
		}
		switch attr(in, "type") {
		case "hidden", "checkbox":
			v.Set(name, attr(in, "value"))
		case "radio":
			if answer, ok := answers[name]; ok {
				v.Set(name, answer)
			} else if v.Get(name) == "" {
				v.Set(name, attr(in, "value"))
			}
		default:
			if answer, ok := answers[name]; ok {
				v.Set(name, answer)
			}
		}
	}
	return v
}

// pageError is the message a page shows about the answers just sent (an
// invalid field, or the payroll provider's refusal), or "".
func pageError(doc *html.Node) string {
	var msgs []string
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode && hasAttr(n, "hidden") {
			return
		}
		if n.Type == html.ElementNode && (hasClass(n, "error") || attr(n, "role") == "alert") {
			msgs = append(msgs, strings.TrimPrefix(strings.Join(strings.Fields(text(n)), " "), "Error: "))
			return
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(doc)
	return strings.Join(msgs, "; ")
}

func hasAttr(n *html.Node, key string) bool {
	return slices.ContainsFunc(n.Attr, func(a html.Attribute) bool { return a.Key == key })
}

func hasClass(n *html.Node, class string) bool {
	return slices.Contains(strings.Fields(attr(n, "class")), class)
}

func hasInputNamed(doc *html.Node, name string) bool {
	for _, in := range findAll(doc, "input") {
		if attr(in, "name") == name {
			return true
		}
	}
	return false
}

// isWaitPage recognises the pages that wait for a vendor (identity
// verification, the payroll provider's word) by their "Check again" link.
func isWaitPage(doc *html.Node) bool {
	return findByID(doc, "check-again") != nil
}

func heading(doc *html.Node) string {
	if h := findAll(doc, "h1"); len(h) > 0 {
		return strings.Join(strings.Fields(text(h[0])), " ")
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
