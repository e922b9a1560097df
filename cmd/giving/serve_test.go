package main

import (
	"context"
	"errors"
	"strings"
	"testing"
)

func TestServeRefusesProductionWithoutTwilio(t *testing.T) {
	for _, name := range []string{"GIVING_TWILIO_ACCOUNT_SID", "GIVING_TWILIO_AUTH_TOKEN", "GIVING_TWILIO_SERVICE_SID"} {
		t.Setenv(name, "")
	}
	var out, errOut strings.Builder
	err := run(context.Background(), []string{"serve", "--env", "production", "--data", t.TempDir(), "--nats-listen", "127.0.0.1:0", "--addr", "127.0.0.1:0",
		"--twilio-account-sid", "AC1", "--twilio-service-sid", "VA1"}, &out, &errOut)
	var u usageError
	if !errors.As(err, &u) || !strings.Contains(err.Error(), "GIVING_TWILIO_AUTH_TOKEN") {
		t.Fatalf("serve on production without a Twilio token: %v", err)
	}
}

func TestServeRefusesProductionWithAStripeTestKey(t *testing.T) {
	f := serveFlags{}
	f.stripe.cfg.SecretKey = "sk_test_51abc"
	missing := strings.Join(f.missingForProduction(), "\n")
	if !strings.Contains(missing, "a test-mode key") {
		t.Fatalf("a Stripe test key passed for production: %s", missing)
	}
	f.stripe.cfg.SecretKey = "rk_live_51abc"
	if strings.Contains(strings.Join(f.missingForProduction(), "\n"), "test-mode") {
		t.Fatal("a live restricted key was refused")
	}
}
