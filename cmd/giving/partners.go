package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/partnergiving/giving/app"
)

// stringList is a repeatable flag.
type stringList []string

func (s *stringList) String() string { return strings.Join(*s, ",") }

func (s *stringList) Set(v string) error {
	for _, part := range strings.Split(v, ",") {
		if part = strings.TrimSpace(part); part != "" {
			*s = append(*s, part)
		}
	}
	return nil
}

func runPartnersCreate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("giving partners create", flag.ContinueOnError)
	var lf ledgerFlags
	lf.register(fs)
	name := fs.String("name", "", "partner name (required)")
	var origins stringList
	fs.Var(&origins, "redirect-origin", "allowlisted https origin for donor redirects (repeatable)")
	asJSON := fs.Bool("json", false, `print {"partner_id": ..., "api_key": ...} as JSON`)
	if err := parseFlags(fs, args, stderr); err != nil {
		return err
	}
	if strings.TrimSpace(*name) == "" {
		return usageError{"--name is required"}
	}
	l, via, err := openLedgerCLI(ctx, &lf)
	if err != nil {
		return err
	}
	defer l.Close()
	id, key, err := app.NewOperators(l).CreatePartner(ctx, *name, origins)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "(via %s)\n", via)
	if *asJSON {
		return json.NewEncoder(stdout).Encode(map[string]string{"partner_id": id, "api_key": key.Secret})
	}
	fmt.Fprintf(stdout, "partner_id: %s\napi_key:    %s\n\nThe key is shown once. Store it now.\n", id, key.Secret)
	return nil
}

func runKeysIssue(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("giving keys issue", flag.ContinueOnError)
	var lf ledgerFlags
	lf.register(fs)
	partner := fs.String("partner", "", "partner id (required)")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := parseFlags(fs, args, stderr); err != nil {
		return err
	}
	if *partner == "" {
		return usageError{"--partner is required"}
	}
	l, via, err := openLedgerCLI(ctx, &lf)
	if err != nil {
		return err
	}
	defer l.Close()
	key, err := app.NewOperators(l).IssueKey(ctx, *partner)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "(via %s)\n", via)
	if *asJSON {
		return json.NewEncoder(stdout).Encode(map[string]string{"partner_id": *partner, "api_key": key.Secret, "key_prefix": key.Prefix})
	}
	fmt.Fprintf(stdout, "api_key: %s\n\nThe key is shown once. Store it now.\n", key.Secret)
	return nil
}

func runKeysRevoke(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("giving keys revoke", flag.ContinueOnError)
	var lf ledgerFlags
	lf.register(fs)
	prefix := fs.String("key-prefix", "", "the key's first characters as shown at issuance, e.g. sk_test_AbCd1234 (required)")
	if err := parseFlags(fs, args, stderr); err != nil {
		return err
	}
	if *prefix == "" {
		return usageError{"--key-prefix is required"}
	}
	l, via, err := openLedgerCLI(ctx, &lf)
	if err != nil {
		return err
	}
	defer l.Close()
	partner, err := app.NewOperators(l).RevokeKey(ctx, *prefix)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "(via %s)\n", via)
	fmt.Fprintf(stdout, "revoked %s of partner %s\n", *prefix, partner)
	return nil
}
