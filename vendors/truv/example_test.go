package truv_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/partnergiving/giving/vendors/truv"
	"github.com/partnergiving/giving/vendors/truv/truvfake"
	"github.com/partnergiving/giving/vendors/truv/truvtest"
)

// The service's side of a switch: open it for a donor, then hand the
// bridge token to the payroll page, which loads truv.BridgeScriptURL and
// calls TruvBridge.init({bridgeToken: ...}).
func ExampleClient_StartSwitch() {
	fake := truvtest.NewServer(truvfake.Config{ClientID: "client", Secret: "sandbox-secret"})
	defer fake.Close()
	c, err := truv.New(truv.Config{BaseURL: fake.URL, ClientID: "client", Secret: "sandbox-secret", ClientName: "Grace Chapel"})
	if err != nil {
		panic(err)
	}
	sw, err := c.StartSwitch(context.Background(), truv.SwitchRequest{
		EndUserID:  "dn_2abc",          // the donor id: Truv gets nothing else about the donor
		Reference:  "en_2xyz",          // comes back as tracking_info on the webhooks
		Allocation: truv.Percent(3_00), // the session's pct 3.00, in hundredths
		Target: truv.Account{
			RoutingNumber: "021000021", AccountNumber: "000123456789",
			Type: truv.Checking, BankName: "First Community Bank",
		},
	})
	switch {
	case errors.Is(err, truv.ErrUnavailable):
		fmt.Println("try again later; keep sw.UserID for the retry")
	case err != nil:
		fmt.Println("cannot switch:", err)
	default:
		fmt.Println("bridge token issued:", sw.BridgeToken != "")
	}
	// Output: bridge token issued: true
}

// The edge's side: verify on the raw body, then act on the outcome.
func ExampleParseEvent() {
	const secret = "sandbox-secret"
	edge := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err := (truv.Verifier{Secrets: []string{secret}}).Verify(r.Header, body); err != nil {
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		e, err := truv.ParseEvent(body)
		switch {
		case errors.Is(err, truv.ErrIgnored):
			w.WriteHeader(http.StatusOK) // authentic, nothing to do
			return
		case err != nil:
			http.Error(w, "not a Truv webhook", http.StatusBadRequest)
			return
		}
		// Deduplicate on e.ID, find the enrollment by e.Reference, then:
		switch e.Type {
		case truv.SwitchSubmitted:
			fmt.Println("enrollment.created for", e.Reference)
		case truv.SwitchConfirmed:
			fmt.Println("enrollment.activated for", e.Reference)
		case truv.SwitchFailed:
			fmt.Println("payroll failed for", e.Reference, "because", e.Reason)
		case truv.SwitchReverted:
			fmt.Println("enrollment.ended for", e.Reference)
		}
		w.WriteHeader(http.StatusOK)
	})
	srv := httptest.NewServer(edge)
	defer srv.Close()

	body, _ := truv.BuildEvent(truv.Event{Type: truv.SwitchConfirmed, Reference: "en_2xyz", LinkID: truv.NewID(), TaskID: truv.NewID()})
	req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(string(body)))
	req.Header = truv.Sign(secret, body)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		panic(err)
	}
	resp.Body.Close()
	fmt.Println(resp.StatusCode)
	// Output:
	// enrollment.activated for en_2xyz
	// 200
}
