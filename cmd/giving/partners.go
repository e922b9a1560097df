package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/partnergiving/giving/app"
	"github.com/partnergiving/giving/domain"
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
	var bf brandFlags
	bf.register(fs)
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
	id, key, err := app.NewOperators(l).CreatePartner(ctx, *name, origins, bf.values)
	if err != nil {
		return flagsError(fs, err)
	}
	fmt.Fprintf(stderr, "(via %s)\n", via)
	if *asJSON {
		return json.NewEncoder(stdout).Encode(map[string]string{"partner_id": id, "api_key": key.Secret})
	}
	fmt.Fprintf(stdout, "partner_id: %s\napi_key:    %s\n\nThe key is shown once. Store it now.\n", id, key.Secret)
	return nil
}

func runPartnersUpdate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("giving partners update", flag.ContinueOnError)
	var lf ledgerFlags
	lf.register(fs)
	partner := fs.String("partner", "", "partner id (required)")
	var bf brandFlags
	bf.register(fs)
	asJSON := fs.Bool("json", false, `print {"partner_id": ..., "changed": ..., "brand": {...}} as JSON`)
	if err := parseFlags(fs, args, stderr); err != nil {
		return err
	}
	if *partner == "" {
		return usageError{"--partner is required"}
	}
	change := bf.change(fs)
	if change == (domain.BrandChange{}) {
		return usageError{"nothing to change: give at least one of " + strings.Join(brandFlagNames(), ", ")}
	}
	l, via, err := openLedgerCLI(ctx, &lf)
	if err != nil {
		return err
	}
	defer l.Close()
	brand, changed, err := app.NewOperators(l).ChangeBrand(ctx, *partner, change)
	if err != nil {
		return flagsError(fs, err)
	}
	fmt.Fprintf(stderr, "(via %s)\n", via)
	if *asJSON {
		return json.NewEncoder(stdout).Encode(map[string]any{"partner_id": *partner, "changed": changed, "brand": brand})
	}
	if !changed {
		fmt.Fprintf(stdout, "partner %s: nothing changed\n", *partner)
		return nil
	}
	fmt.Fprintf(stdout, "partner %s: what donors see is now\n", *partner)
	for _, f := range brandFields {
		fmt.Fprintf(stdout, "  %-14s %s\n", f.flag+":", *f.field(&brand))
	}
	return nil
}

// brandFields are the flags of what donors see of a partner, shared by
// partners create and partners update, each with the brand field it sets
// and the change that sets it.
var brandFields = []struct {
	flag, usage string
	field       func(*domain.Brand) *string
	change      func(*domain.BrandChange) **string
}{
	{"display-name", "the name donors know the partner by, shown on every flow page and in the consent (default: --name)",
		func(b *domain.Brand) *string { return &b.DisplayName }, func(c *domain.BrandChange) **string { return &c.DisplayName }},
	{"logo-url", "https URL of the partner's logo, shown on every flow page",
		func(b *domain.Brand) *string { return &b.LogoURL }, func(c *domain.BrandChange) **string { return &c.LogoURL }},
	{"support-url", "https URL where donors get help and stop giving (or --support-email; production: one of them is required)",
		func(b *domain.Brand) *string { return &b.SupportURL }, func(c *domain.BrandChange) **string { return &c.SupportURL }},
	{"support-email", "email address where donors get help and stop giving (or --support-url)",
		func(b *domain.Brand) *string { return &b.SupportEmail }, func(c *domain.BrandChange) **string { return &c.SupportEmail }},
	{"privacy-url", "https URL of the partner's privacy policy (production: required)",
		func(b *domain.Brand) *string { return &b.PrivacyURL }, func(c *domain.BrandChange) **string { return &c.PrivacyURL }},
	{"terms-url", "https URL of the partner's terms (production: required)",
		func(b *domain.Brand) *string { return &b.TermsURL }, func(c *domain.BrandChange) **string { return &c.TermsURL }},
}

func brandFlagNames() []string {
	out := make([]string, len(brandFields))
	for i, f := range brandFields {
		out[i] = "--" + f.flag
	}
	return out
}

// brandFlags holds the values of the brand flags.
type brandFlags struct {
	values domain.Brand
}

func (b *brandFlags) register(fs *flag.FlagSet) {
	for _, f := range brandFields {
		fs.StringVar(f.field(&b.values), f.flag, "", f.usage)
	}
}

// change is what the brand flags given (on the command line or by their
// GIVING_* variable) change: an empty value clears its field.
func (b *brandFlags) change(fs *flag.FlagSet) domain.BrandChange {
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var c domain.BrandChange
	for _, f := range brandFields {
		if given[f.flag] {
			v := *f.field(&b.values)
			*f.change(&c) = &v
		}
	}
	return c
}

// flagsError names the flags an invalid request is about, where a flag
// sets the field.
func flagsError(fs *flag.FlagSet, err error) error {
	var de *domain.Error
	if !errors.As(err, &de) || len(de.Fields) == 0 {
		return err
	}
	parts := make([]string, len(de.Fields))
	for i, f := range de.Fields {
		name := f.Field
		if fs.Lookup(strings.ReplaceAll(name, "_", "-")) != nil {
			name = "--" + strings.ReplaceAll(name, "_", "-")
		}
		parts[i] = name + ": " + f.Detail
	}
	return fmt.Errorf("%s %s", de.Detail, strings.Join(parts, "; "))
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
