package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/partnergiving/giving/sandbox"
)

// runCompleteFlow completes a donor's hosted flow through its HTML forms
// (package sandbox) and prints the enrollment it created, so a script or a
// partner's CI can go on to payroll-connected and the feed. With
// --stop-at-identity it stops where the donor waits for the identity
// simulator; run again with the same --state, it continues.
func runCompleteFlow(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("giving sandbox complete-flow", flag.ContinueOnError)
	var d sandbox.Donor
	fs.StringVar(&d.PhoneCode, "phone-code", "000000", "the SMS code to enter (the sandbox's is always 000000)")
	fs.StringVar(&d.Username, "username", "user_good", "payroll sign-in username (user_bad fails)")
	fs.StringVar(&d.Password, "password", "pass_good", "payroll sign-in password")
	fs.BoolVar(&d.StopAtIdentity, "stop-at-identity", false, "stop where the donor waits for identity verification (decide it with POST /sandbox/simulate/kyc, then run again with the same --state)")
	state := fs.String("state", "", "file keeping the donor's browser (its session cookie), to continue the flow in a later run")
	key := fs.String("api-key", "", "sandbox API key (sk_test_...) of the partner that opened the session, to read the enrollment (required)")
	timeout := fs.Duration("timeout", 2*time.Minute, "how long to wait, identity verification included")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: giving sandbox complete-flow URL --api-key sk_test_... [flags]")
		fs.PrintDefaults()
	}
	var flowURL string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		flowURL, args = args[0], args[1:]
	}
	if err := parseFlags(fs, args, stderr); err != nil {
		return err
	}
	if flowURL == "" {
		return usageError{"usage: giving sandbox complete-flow URL --api-key sk_test_... (URL is the donor session's url)"}
	}
	base, err := sandbox.FlowBase(flowURL)
	if err != nil {
		return usageError{err.Error()}
	}
	if d.StopAtIdentity && *state == "" {
		return usageError{"--stop-at-identity needs --state FILE, to continue the same donor's flow afterwards"}
	}
	if !strings.HasPrefix(*key, "sk_test_") {
		return usageError{"--api-key must be the partner's sandbox key (sk_test_...); it reads the enrollment the flow created"}
	}
	api, err := sandbox.NewClient(base, *key)
	if err != nil {
		return usageError{err.Error()}
	}
	if *state != "" {
		if d.Jar, err = sandbox.LoadJar(*state, flowURL); err != nil {
			return err
		}
	}
	d.Progress = func(h string) { fmt.Fprintf(stderr, "flow: %s\n", h) }
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	res, err := d.CompleteFlow(ctx, flowURL)
	if err == nil && *state != "" {
		err = sandbox.SaveJar(*state, flowURL, d.Jar)
	}
	switch {
	case err != nil:
		return err
	case res.Status == sandbox.FlowWaiting:
		fmt.Fprintln(stderr, "flow: stopped; the donor waits for identity verification")
		return nil
	case !res.Completed():
		return fmt.Errorf("session %s ended %s", res.SessionID, res.Status)
	}
	en, err := api.SessionEnrollment(ctx, res.SessionID, 10*time.Second)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, en)
	return nil
}

// runReceive is a local webhook receiver: it verifies every delivery by
// the spec's rules and prints it, for trying webhooks by hand.
func runReceive(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("giving sandbox receive", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:9000", "address to listen on")
	var secrets []string
	fs.Func("secret", "the endpoint's whsec_ secret, to verify signatures with (required); give it twice, the previous and the new one, while a rotation overlaps", func(s string) error {
		if !strings.HasPrefix(s, "whsec_") {
			return errors.New("must be the endpoint's whsec_ secret, shown when it was registered or rotated")
		}
		secrets = append(secrets, s)
		return nil
	})
	if err := parseFlags(fs, args, stderr); err != nil {
		return err
	}
	if len(secrets) == 0 {
		return usageError{"--secret must be the endpoint's whsec_ secret, shown when it was registered"}
	}
	r, err := sandbox.Listen(*listen, stdout)
	if err != nil {
		return err
	}
	r.SetSecret(secrets...)
	fmt.Fprintf(stderr, "receiving webhooks on http://%s (any path); Ctrl-C stops\n", r.Addr())
	<-ctx.Done()
	r.Close()
	return nil
}
