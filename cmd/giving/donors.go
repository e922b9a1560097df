package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog"
)

// runDonorsForget erases a donor's phone from the vault for good. The ledger
// keeps the donor id, which without the phone identifies no one. Like the
// other operator commands it works against a running instance or directly
// on the data directory.
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
	l, via, err := openLedgerCLI(ctx, &lf)
	if err != nil {
		return err
	}
	defer l.Close()
	fmt.Fprintf(stderr, "(via %s)\n", via)
	if *partner != "" {
		ok, err := donorOfPartner(ctx, l, *partner, donor)
		if err != nil {
			return err
		}
		if !ok {
			return domain.Errorf(domain.KindNotFound, "not-found", "Donor %s has no session with partner %s; nothing was erased.", donor, *partner)
		}
	}
	err = l.ForgetDonor(ctx, donor)
	if errors.Is(err, eventlog.ErrForgotten) {
		fmt.Fprintf(stdout, "%s: no phone stored (already erased, or never stored)\n", donor)
		return nil
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s: phone erased\n", donor)
	return nil
}

// donorOfPartner reports whether one of the partner's sessions was opened
// for donor. Only session openings are read: the filter is applied by the
// server.
func donorOfPartner(ctx context.Context, l *eventlog.Ledger, partner, donor string) (bool, error) {
	var after uint64
	for {
		recs, pending, err := l.Read(ctx, l.Subjects().OfType("donor_session.created"), after, 1000)
		if err != nil {
			return false, err
		}
		for _, r := range recs {
			after = r.Seq
			if r.Partner != partner {
				continue
			}
			ev, err := r.Event()
			if err != nil {
				return false, err
			}
			if ev.Payload.(*domain.SessionCreated).DonorID == donor {
				return true, nil
			}
		}
		if pending == 0 || len(recs) == 0 {
			return false, nil
		}
	}
}
