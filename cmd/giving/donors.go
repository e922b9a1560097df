package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/partnergiving/giving/app"
	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/secrets"
)

// runDonorsForget erases a donor's phone from the vault for good. The ledger
// keeps the donor id, which without the phone identifies no one. Like the
// other operator commands it works against a running instance or directly
// on the data directory. It needs the service's master key (--master-key,
// or the one in --data): the donors who shared the erased phone keys are
// moved to vault entries of their own. It may wait up to a minute and a
// half for a phone key that still seals. It says where it found the donor's
// sessions: a running instance's projections, or a read of the ledger.
func runDonorsForget(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("giving donors forget", flag.ContinueOnError)
	var lf ledgerFlags
	lf.register(fs)
	partner := fs.String("partner", "", "refuse unless the donor has a session with this partner (pt_...)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: giving donors forget dn_... [--partner pt_...] [flags]")
		fs.PrintDefaults()
	}
	var donor string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		donor, args = args[0], args[1:]
	}
	if err := parseFlags(fs, args, stderr); err != nil {
		return err
	}
	if donor == "" {
		return usageError{"usage: giving donors forget dn_... [--partner pt_...]"}
	}
	if !domain.ValidID(domain.PrefixDonor, donor) {
		return usageError{fmt.Sprintf("%q is not a donor id (dn_...)", donor)}
	}
	if *partner != "" && !domain.ValidID(domain.PrefixPartner, *partner) {
		return usageError{fmt.Sprintf("--partner %q is not a partner id (pt_...)", *partner)}
	}
	secrets, err := secrets.Read(lf.masterKey, lf.data)
	if err != nil {
		return err
	}
	l, via, err := openLedgerCLI(ctx, &lf)
	if err != nil {
		return err
	}
	defer l.Close()
	fmt.Fprintf(stderr, "(via %s)\n", via)
	fmt.Fprintln(stderr, "(a phone key that sealed in the last 30 seconds is erased once it closes, up to a minute and a half from now)")
	f, err := app.NewOperators(l).ForgetDonor(ctx, secrets, donor, *partner)
	if f.SessionsFrom != "" {
		fmt.Fprintf(stderr, "(the donor's sessions: from %s)\n", f.SessionsFrom)
	}
	if err != nil {
		return err
	}
	if !f.Erased {
		fmt.Fprintf(stdout, "%s: no phone stored (already erased, or never stored)\n", donor)
		return nil
	}
	fmt.Fprintf(stdout, "%s: phone erased\n", donor)
	return nil
}
