package e2e

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/partnergiving/giving/eventlog/eventlogtest"
	"github.com/partnergiving/giving/vendors/increase/increasefake"
	"github.com/partnergiving/giving/vendors/stripeidentity/stripefake"
	"github.com/partnergiving/giving/vendors/truv/truvfake"
	"github.com/partnergiving/giving/vendors/truv/truvtest"
)

// The production stack starts from deploy/systemd/giving.env.example as
// shipped, once what an operator must replace is filled in: its cluster's
// and vendors' addresses with loopback ones (the deploy example's own
// 3-node cluster, a Twilio stand-in, a Stripe fake), its CHANGE-ME secrets
// with values.
// Without them it refuses, and names every missing setting in one error.
func TestProductionStartsFromTheEnvExample(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs a 3-node cluster and the binary")
	}
	example := readEnvFile(t, "../deploy/systemd/giving.env.example")

	// As shipped, nothing an operator must fill in is filled in: the
	// refusal names each setting, all at once.
	refused := runCLI(t, envList(example, map[string]string{"GIVING_DATA": t.TempDir(), "GIVING_ADDR": "127.0.0.1:0", "GIVING_METRICS_ADDR": ""}), "serve")
	if refused.Code == 0 {
		t.Fatal("the production stack started with the example's CHANGE-ME values")
	}
	for _, name := range []string{"GIVING_TWILIO_ACCOUNT_SID", "GIVING_TWILIO_AUTH_TOKEN", "GIVING_TWILIO_SERVICE_SID",
		"GIVING_TRUV_CLIENT_ID", "GIVING_TRUV_SECRET", "GIVING_STRIPE_SECRET_KEY", "GIVING_STRIPE_WEBHOOK_SECRET", "GIVING_MASTER_KEY",
		"GIVING_INCREASE_API_KEY", "GIVING_INCREASE_WEBHOOK_SECRET", "GIVING_INCREASE_ACCOUNT_ID"} {
		if !strings.Contains(refused.Stderr, name) {
			t.Errorf("the refusal does not name %s: %s", name, refused.Stderr)
		}
	}
	if n := strings.Count(refused.Stderr, "\n"); n > 3 {
		t.Errorf("the refusal takes %d lines, want one error: %s", n, refused.Stderr)
	}

	cluster := eventlogtest.StartCluster(t, "../deploy/nats")
	twilio := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no text messages in this test", http.StatusNotFound)
	}))
	t.Cleanup(twilio.Close)
	truvAPI := truvtest.NewServer(truvfake.Config{ClientID: "truv-client", Secret: "truv-secret"})
	t.Cleanup(truvAPI.Close)
	stripe := stripefake.Start(stripefake.Config{SecretKey: "sk_live_51EnvExample"})
	t.Cleanup(stripe.Close)
	bank := increasefake.New(increasefake.Options{APIKey: "increase-key"})
	bank.AddAccount("account_church_gifts", "first_internet_bank")
	bankAPI := httptest.NewServer(bank)
	t.Cleanup(bankAPI.Close)
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	// The example's cluster hosts are nats-N.internal:4222; the cluster's
	// nodes listen on loopback, with the credentials the example names.
	hosts := regexp.MustCompile(`nats-(\d)\.internal:4222`)
	natsURL := hosts.ReplaceAllStringFunc(example["GIVING_NATS_URL"], func(h string) string {
		n := int(h[len("nats-")] - '1')
		return cluster.URLs[n][strings.LastIndex(cluster.URLs[n], "@")+1:]
	})
	filled := map[string]string{
		"GIVING_DATA": t.TempDir(), "GIVING_ADDR": freeAddr(t), "GIVING_METRICS_ADDR": freeAddr(t),
		"GIVING_NATS_URL": natsURL, "GIVING_MASTER_KEY": hex.EncodeToString(key),
		"GIVING_TWILIO_ACCOUNT_SID": "AC1", "GIVING_TWILIO_AUTH_TOKEN": "token", "GIVING_TWILIO_SERVICE_SID": "VA1",
		"GIVING_TWILIO_BASE_URL": twilio.URL,
		"GIVING_TRUV_CLIENT_ID":  "truv-client", "GIVING_TRUV_SECRET": "truv-secret", "GIVING_TRUV_BASE_URL": truvAPI.URL,
		"GIVING_TRUV_BRIDGE_SCRIPT_URL": truvAPI.BridgeScriptURL(),
		"GIVING_STRIPE_SECRET_KEY":      "sk_live_51EnvExample", "GIVING_STRIPE_WEBHOOK_SECRET": "whsec_envExample", "GIVING_STRIPE_BASE_URL": stripe.URL,
		"GIVING_INCREASE_API_KEY": "increase-key", "GIVING_INCREASE_WEBHOOK_SECRET": "bank-secret",
		"GIVING_INCREASE_ACCOUNT_ID": "account_church_gifts", "GIVING_INCREASE_BASE_URL": bankAPI.URL,
	}
	for name := range filled {
		if _, ok := example[name]; !ok {
			t.Fatalf("the example does not name %s", name)
		}
	}
	srv := launchCommand(t, "", envList(example, filled), "serve")
	srv.waitPrinted(t, "its address", func(line string) bool { return strings.Contains(line, "production stack listening on") })
	base := "http://" + filled["GIVING_ADDR"]
	waitFor(t, time.Minute, "/readyz to answer 200", func() bool {
		resp, err := http.Get(base + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	for _, secret := range []string{filled["GIVING_MASTER_KEY"], "token", "truv-secret", "bank-secret", "increase-key", "sk_live_51EnvExample", "whsec_envExample", "CHANGE-ME-CLIENT"} {
		if strings.Contains(srv.Stdout.String()+srv.Stderr.String(), secret) {
			t.Errorf("the service logged a secret (%.8s...)", secret)
		}
	}
}

// readEnvFile reads a systemd EnvironmentFile's NAME=value lines.
func readEnvFile(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, value, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf("%s: not NAME=value: %q", path, line)
		}
		out[name] = value
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// envList is vars with over's values in place, as a process environment.
func envList(vars, over map[string]string) []string {
	var out []string
	for name, value := range vars {
		if v, ok := over[name]; ok {
			value = v
		}
		out = append(out, fmt.Sprintf("%s=%s", name, value))
	}
	return out
}
