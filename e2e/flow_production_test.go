package e2e

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/internal/stack"
	"github.com/partnergiving/giving/sms"
)

func withSMS(v sms.Verifier) stackOption {
	return func(c *stack.Config) { c.SMS = v }
}

// TestProductionFlowVerifiesThroughTwilio runs the phone step of a
// production stack against a local fake of Twilio Verify: the code comes
// from Twilio, the sandbox's 000000 does not work, and no seed donor exists.
func TestProductionFlowVerifiesThroughTwilio(t *testing.T) {
	t.Parallel()
	tw := startTwilio(t, "424242")
	ts := startStack(t, withEnv(domain.Production), withSMS(tw.verifier))
	c, _ := ts.partner(t)
	church := importChurch(t, c, "Grace")
	s := openSession(t, c, church, "+12025550100", "pct", "2", "https://partner.example/back")
	d := newDonorBrowser(t, s.URL, nil)
	d.open("").expect(t, http.StatusOK, "Confirm it's you")
	if strings.Contains(d.page.Body, "sandbox-note") || strings.Contains(d.page.Body, "000000") {
		t.Fatalf("the production code page shows the sandbox hint: %s", d.page.Body)
	}
	d.submit("code", nil)
	if p := d.submit("verify", url.Values{"code": {"000000"}}); !strings.Contains(p.Body, "That code is not right.") {
		t.Fatalf("the sandbox code worked in production: %s", p.Body)
	}
	d.submit("verify", url.Values{"code": {"424242"}}).expect(t, http.StatusOK, "Agree to give")
	d.submit("consent", url.Values{"version": {domain.ConsentVersion}, "gift": {"yes"}, "terms": {"yes"}}).expect(t, http.StatusOK, "Check your identity")
	want := []string{
		"AC1:tok /v2/Services/VA1/Verifications Channel=sms&To=%2B12025550100",
		"AC1:tok /v2/Services/VA1/VerificationCheck Code=000000&To=%2B12025550100",
		"AC1:tok /v2/Services/VA1/VerificationCheck Code=424242&To=%2B12025550100",
	}
	if calls := tw.received(); strings.Join(calls, "\n") != strings.Join(want, "\n") {
		t.Fatalf("Twilio calls:\n%s", strings.Join(calls, "\n"))
	}
}

// twilio is a local Twilio Verify: it records each call (credentials,
// path, form) and approves one code.
type twilio struct {
	verifier sms.Verifier
	mu       sync.Mutex
	calls    []string
}

func startTwilio(t *testing.T, code string) *twilio {
	t.Helper()
	tw := &twilio{}
	fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, pass, _ := r.BasicAuth()
		_ = r.ParseForm()
		tw.mu.Lock()
		tw.calls = append(tw.calls, user+":"+pass+" "+r.URL.Path+" "+r.PostForm.Encode())
		tw.mu.Unlock()
		switch {
		case strings.HasSuffix(r.URL.Path, "/Verifications"):
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write([]byte(`{"status":"pending"}`))
		case r.PostForm.Get("Code") == code:
			_, _ = w.Write([]byte(`{"status":"approved","valid":true}`))
		default:
			_, _ = w.Write([]byte(`{"status":"pending","valid":false}`))
		}
	}))
	t.Cleanup(fake.Close)
	v, err := sms.NewTwilio(sms.TwilioConfig{BaseURL: fake.URL, AccountSID: "AC1", AuthToken: "tok", ServiceSID: "VA1"})
	if err != nil {
		t.Fatal(err)
	}
	tw.verifier = v
	return tw
}

func (tw *twilio) received() []string {
	tw.mu.Lock()
	defer tw.mu.Unlock()
	return append([]string(nil), tw.calls...)
}
