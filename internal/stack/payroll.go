package stack

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"

	"github.com/partnergiving/giving/app"
	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/simulators"
	"github.com/partnergiving/giving/vendors/truv"
	"github.com/partnergiving/giving/vendors/truv/truvfake"
)

// TruvConfig is the production stack's account with Truv, the payroll
// vendor.
type TruvConfig struct {
	ClientID string
	// Secret is the access secret: it authenticates the service's calls
	// and signs Truv's webhooks to /edge/payroll.
	Secret string
	// BaseURL is Truv's API; truv.DefaultBaseURL when empty.
	BaseURL string
	// BridgeScriptURL is Truv Bridge's script; truv.BridgeScriptURL when
	// empty.
	BridgeScriptURL string
	// BridgeOrigins are origins Truv Bridge may frame or call besides its
	// script's, which the widget page's policy allows too.
	BridgeOrigins []string
}

// truvPayroll is the payroll port on Truv: a switch opens Truv Bridge on a
// bridge token that carries the church's account and the donor's
// allocation.
type truvPayroll struct {
	client *truv.Client
	widget app.PayrollWidget
}

func (p truvPayroll) Widget() app.PayrollWidget { return p.widget }

func (p truvPayroll) StartSwitch(ctx context.Context, sw app.PayrollSwitch) (app.PayrollStart, error) {
	alloc := truv.Amount(int64(sw.Giving.Value))
	if sw.Giving.Mode == domain.ModePercent {
		alloc = truv.Percent(int64(sw.Giving.Value))
	}
	s, err := p.client.StartSwitch(ctx, truv.SwitchRequest{
		UserID: sw.VendorUser, EndUserID: sw.DonorID, Reference: sw.Reference, ClientName: sw.ClientName,
		Target: truv.Account{
			RoutingNumber: sw.Target.RoutingNumber, AccountNumber: sw.Target.AccountNumber,
			Type: truv.Checking, BankName: sw.Target.BankName,
		},
		Allocation: alloc,
	})
	return app.PayrollStart{Token: s.BridgeToken, VendorUser: s.UserID}, err
}

// payrollVendor builds the payroll port. Production talks to Truv. The
// sandbox runs the same adapter against a Truv stand-in built into the
// service (truvfake, reached in process, no network): its widget is served
// to browsers under /standin/truv/, it signs its webhooks with the
// sandbox's payroll secret and sends them through the production edge,
// and it stops at the switch's submission: the payroll provider's
// confirmation is the payroll-connected simulator's to send. The stand-in
// keeps nothing between requests (its users and tokens seal themselves),
// so any instance serves what another issued.
func (s *Stack) payrollVendor(secret []byte) (app.Payroll, http.Handler, error) {
	cfg := s.Config
	if cfg.Ledger.Env != domain.Sandbox {
		t := cfg.Truv
		script := t.BridgeScriptURL
		if script == "" {
			script = truv.BridgeScriptURL
		}
		origin, err := originOf(script)
		if err != nil {
			return nil, nil, err
		}
		client, err := truv.New(truv.Config{BaseURL: t.BaseURL, ClientID: t.ClientID, Secret: t.Secret, HTTPClient: vendorClient()})
		if err != nil {
			return nil, nil, err
		}
		origins := []string{origin}
		for _, o := range t.BridgeOrigins {
			extra, err := originOf(o)
			if err != nil || extra != strings.TrimRight(o, "/") || !strings.HasPrefix(extra, "https://") {
				return nil, nil, fmt.Errorf("--truv-bridge-origins: %q is not an https origin", o)
			}
			origins = append(origins, extra)
		}
		return truvPayroll{client: client, widget: app.PayrollWidget{ScriptURL: script, Origins: origins}}, nil, nil
	}
	public := strings.TrimRight(cfg.PublicURL, "/")
	standIn := truvfake.New(truvfake.Config{
		ClientID: "sandbox", Secret: string(secret), HoldDone: true, Forget: true,
		WebhookURL: public + "/edge/payroll", PublicURL: public + "/standin/truv",
		HTTPClient: simulators.EdgeClient(cfg.TLSRoots),
	})
	client, err := truv.New(truv.Config{
		BaseURL: "http://truv.standin", ClientID: "sandbox", Secret: string(secret),
		HTTPClient: &http.Client{Transport: inProcess{standIn}},
	})
	if err != nil {
		return nil, nil, err
	}
	origin, err := originOf(public)
	if err != nil {
		return nil, nil, err
	}
	widget := app.PayrollWidget{ScriptURL: public + "/standin/truv/bridge.js", Origins: []string{origin}}
	return truvPayroll{client: client, widget: widget}, bridgeOnly(standIn), nil
}

// bridgeOnly serves the stand-in's browser side alone (the Bridge script
// and widget): its API answers the service in process, not the world.
func bridgeOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/bridge.js" && !strings.HasPrefix(r.URL.Path, "/bridge/") {
			http.NotFound(w, r)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// inProcess is a transport that hands each request to a handler in this
// process.
type inProcess struct{ h http.Handler }

func (t inProcess) RoundTrip(r *http.Request) (*http.Response, error) {
	rec := httptest.NewRecorder()
	t.h.ServeHTTP(rec, r)
	return rec.Result(), nil
}

// originOf is the origin of an absolute URL, as a CSP source.
func originOf(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return "", errors.New("not an absolute URL: " + raw)
	}
	return u.Scheme + "://" + u.Host, nil
}
