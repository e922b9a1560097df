package e2e

import (
	"context"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Instances behind one load balancer: the browser that opened the flow on
// one instance is recognised on another whose projections have not applied
// the binding yet, for pages and for forms; any other browser is still
// refused there.
func TestFlowBindingOnALaggingInstance(t *testing.T) {
	t.Parallel()
	a := startStack(t, withNATSListen("127.0.0.1:0"))
	key, err := os.ReadFile(filepath.Join(a.Dir, "master.key"))
	if err != nil {
		t.Fatal(err)
	}
	b := openStack(t, withNATSURL(a.Ledger.ClientURL()), withMasterKey(strings.TrimSpace(string(key))))
	c, pid := a.partner(t)
	church := importChurch(t, c, "Grace")
	s := openSession(t, c, church, "+12025550100", "pct", "3", "https://partner.example/back")
	// b's projector follows the ledger up to here; from then on b applies
	// nothing: it lags behind the ledger.
	follow, stopFollowing := context.WithCancel(context.Background())
	followed := make(chan struct{})
	go func() {
		defer close(followed)
		b.Projector.Run(follow)
	}()
	b.waitProjected(t)
	stopFollowing()
	<-followed

	path := strings.TrimPrefix(s.URL, a.URL)
	d := newDonorBrowser(t, a.URL+path, nil)
	d.open("").expect(t, http.StatusOK, "Confirm it's you")
	if lagging, ok, err := b.Store.Session(pid, s.ID); err != nil || !ok || lagging.BindingHash != "" {
		t.Fatalf("instance b should not have applied the binding: %+v %v %v", lagging, ok, err)
	}

	// The same browser (its cookie jar ignores ports) on instance b.
	d.url = b.URL + path
	d.open("").expect(t, http.StatusOK, "Confirm it's you")
	p := d.submit("verify", url.Values{"code": {"12"}})
	p.expect(t, http.StatusOK, "Confirm it's you")
	if !strings.Contains(p.URL, "?e=code-format") {
		t.Fatalf("the form on the lagging instance was not taken: %s", p.URL)
	}

	other := newDonorBrowser(t, b.URL+path, nil)
	other.open("").expect(t, http.StatusForbidden, "This link was already used")
	if n := sessionEvents(t, a.Ledger, s.ID, "donor_session.opened"); n != 1 {
		t.Fatalf("%d donor_session.opened events, want 1", n)
	}
}
