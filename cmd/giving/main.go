// Command giving runs the Partner Giving service and its operator tools.
//
//	giving serve                      run the service (embedded NATS and bbolt under --data)
//	giving partners create ...        onboard a partner and print its first API key
//	giving partners update ...        change what donors see of a partner
//	giving keys issue|revoke ...      manage API keys
//	giving replay                     rebuild the projections from the ledger
//	giving certify --base-url --api-key   run the certification sequence against a sandbox
//	giving donors forget dn_...       erase a donor's phone for good
//	giving bench                      measure the service against the disk's limit
//	giving sandbox complete-flow URL  complete a donor's hosted flow; print the enrollment
//	giving sandbox receive            a local webhook receiver that verifies and prints
//	giving listen                     forward the partner's events to a local receiver, signed
//	giving dashboard --api-key        print a sign-in link to the partner's dashboard
//
// Run "giving <command> -h" for each command's flags. Every flag can also be
// set with a GIVING_* environment variable (--nats-url is GIVING_NATS_URL).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "giving:", err)
		}
		os.Exit(exitCode(err))
	}
}

// exitCode is 2 for usage errors, 1 otherwise.
func exitCode(err error) int {
	var u usageError
	if errors.As(err, &u) || errors.Is(err, flag.ErrHelp) {
		return 2
	}
	return 1
}

type usageError struct{ msg string }

func (u usageError) Error() string { return u.msg }

const usage = `usage: giving <command> [flags]

commands:
  serve              run the service
  partners create    onboard a partner and print its first API key
  partners update    change what donors see of a partner (name, logo, links)
  keys issue         issue another API key to a partner
  keys revoke        revoke an API key by its prefix
  replay             rebuild the projections from the ledger
  certify            run the certification sequence against a sandbox
  donors forget      erase a donor's phone number for good
  bench              measure the service against the disk's raw limit
  sandbox complete-flow URL   complete a donor's hosted flow (sandbox answers); print the enrollment id
  sandbox receive    a local webhook receiver that verifies every delivery and prints it
  listen             forward the partner's events (from the feed) to a local receiver, signed like deliveries
  dashboard          print a single-use sign-in link to the partner's dashboard

Run "giving <command> -h" for a command's flags.`

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprintln(stderr, usage)
		return usageError{"no command"}
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "serve":
		return runServe(ctx, rest, stdout, stderr)
	case "partners":
		return runSub(ctx, "partners", rest, stdout, stderr, map[string]subcommand{"create": runPartnersCreate, "update": runPartnersUpdate})
	case "keys":
		return runSub(ctx, "keys", rest, stdout, stderr, map[string]subcommand{"issue": runKeysIssue, "revoke": runKeysRevoke})
	case "replay":
		return runReplay(ctx, rest, stdout, stderr)
	case "donors":
		return runSub(ctx, "donors", rest, stdout, stderr, map[string]subcommand{"forget": runDonorsForget})
	case "certify":
		return runCertify(ctx, rest, stdout, stderr)
	case "bench":
		return runBench(ctx, rest, stdout, stderr)
	case "sandbox":
		return runSub(ctx, "sandbox", rest, stdout, stderr, map[string]subcommand{"complete-flow": runCompleteFlow, "receive": runReceive})
	case "dashboard":
		return runDashboard(ctx, rest, stdout, stderr)
	case "listen":
		return runListen(ctx, rest, stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprintln(stdout, usage)
		return nil
	}
	fmt.Fprintln(stderr, usage)
	return usageError{fmt.Sprintf("unknown command %q", cmd)}
}

type subcommand func(ctx context.Context, args []string, stdout, stderr io.Writer) error

func runSub(ctx context.Context, name string, args []string, stdout, stderr io.Writer, subs map[string]subcommand) error {
	if len(args) > 0 {
		if f, ok := subs[args[0]]; ok {
			return f(ctx, args[1:], stdout, stderr)
		}
	}
	fmt.Fprintln(stderr, usage)
	return usageError{fmt.Sprintf("%s: expected one of its subcommands", name)}
}
