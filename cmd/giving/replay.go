package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/rs/zerolog"
	"github.com/schollz/progressbar/v3"

	"github.com/partnergiving/giving/eventlog"
	"github.com/partnergiving/giving/eventlog/control"
	"github.com/partnergiving/giving/internal/stack"
	"github.com/partnergiving/giving/projections"
)

func runReplay(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("giving replay", flag.ContinueOnError)
	var lf ledgerFlags
	lf.register(fs)
	if err := parseFlags(fs, args, stderr); err != nil {
		return err
	}
	l, via, err := openLedgerCLI(ctx, &lf)
	if err != nil {
		return err
	}
	defer l.Close()
	fmt.Fprintf(stderr, "replay via %s\n", via)
	if l.Embedded() {
		return replayOffline(ctx, l, &lf, stdout, stderr)
	}
	return replayOnline(ctx, l, stdout, stderr)
}

// replayOffline rebuilds the projection file of a stopped instance.
func replayOffline(ctx context.Context, l *eventlog.Ledger, lf *ledgerFlags, stdout, stderr io.Writer) error {
	cfg, _ := lf.config()
	store, err := projections.Open(stack.ProjectionsPath(cfg))
	if err != nil {
		return err
	}
	defer store.Close()
	p := projections.NewProjector(store, l, zerolog.Nop())
	bar := newProgress(stderr, "local")
	if err := p.Rebuild(ctx, bar.report); err != nil {
		return err
	}
	bar.finish()
	// Nothing serves from the file until the instance starts: merge the
	// deposits the rebuild wrote in runs now rather than at the start.
	if err := store.MergeRuns(); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "rebuilt %s up to sequence %d\n", store.Path(), store.Applied())
	return nil
}

// replayOnline asks every running instance to rebuild and swap its file,
// and follows their progress until each is done.
func replayOnline(ctx context.Context, l *eventlog.Ledger, stdout, stderr io.Writer) error {
	replies, err := control.New(l).Request(stack.ReplayTopic)
	if err != nil {
		return err
	}
	defer replies.Close()
	bars := map[string]*progress{}
	done := map[string]bool{}
	var failed []error
	// Instances answer within a second; after that, wait only for the ones
	// that answered.
	deadline := time.Now().Add(2 * time.Second)
	for {
		wait := time.Until(deadline)
		if len(bars) > 0 && len(done) < len(bars) {
			wait = time.Minute
		}
		if wait <= 0 || (len(bars) > 0 && len(done) == len(bars)) {
			break
		}
		data, err := replies.Next(wait)
		if err != nil {
			if len(bars) == 0 {
				return errors.New("no running instance answered the replay request")
			}
			return fmt.Errorf("instances stopped reporting: %w", err)
		}
		var r stack.ReplayReport
		if err := json.Unmarshal(data, &r); err != nil {
			continue
		}
		bar, ok := bars[r.Instance]
		if !ok {
			bar = newProgress(stderr, r.Instance)
			bars[r.Instance] = bar
		}
		bar.report(r.Applied, r.Total)
		if r.Done {
			bar.finish()
			done[r.Instance] = true
			if r.Error != "" {
				failed = append(failed, fmt.Errorf("%s: %s", r.Instance, r.Error))
			} else {
				fmt.Fprintf(stdout, "%s rebuilt up to sequence %d\n", r.Instance, r.Applied)
			}
		}
	}
	return errors.Join(failed...)
}

// progress shows a rebuild's count, rate and ETA: a bar on a terminal,
// plain lines (at most one a second) otherwise.
type progress struct {
	w     io.Writer
	label string
	bar   *progressbar.ProgressBar
	start time.Time
	last  time.Time
	total uint64
	done  uint64
}

func newProgress(w io.Writer, label string) *progress {
	return &progress{w: w, label: label, start: time.Now()}
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && (isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd()))
}

func (p *progress) report(applied, total uint64) {
	p.done, p.total = applied, total
	if isTerminal(p.w) {
		if p.bar == nil {
			p.bar = progressbar.NewOptions64(int64(total),
				progressbar.OptionSetWriter(p.w),
				progressbar.OptionSetDescription("replay "+p.label),
				progressbar.OptionShowCount(),
				progressbar.OptionShowIts(),
				progressbar.OptionSetItsString("events"),
				progressbar.OptionSetPredictTime(true),
				progressbar.OptionThrottle(100*time.Millisecond),
			)
		}
		_ = p.bar.Set64(int64(applied))
		return
	}
	if time.Since(p.last) < time.Second {
		return
	}
	p.last = time.Now()
	p.line()
}

func (p *progress) line() {
	elapsed := time.Since(p.start).Seconds()
	rate := 0.0
	if elapsed > 0 {
		rate = float64(p.done) / elapsed
	}
	eta := "-"
	if rate > 0 && p.total >= p.done {
		eta = time.Duration(float64(p.total-p.done) / rate * float64(time.Second)).Round(time.Second).String()
	}
	pct := 100.0
	if p.total > 0 {
		pct = 100 * float64(p.done) / float64(p.total)
	}
	fmt.Fprintf(p.w, "replay %s: %d/%d events (%.0f%%), %.0f events/s, eta %s\n", p.label, p.done, p.total, pct, rate, eta)
}

func (p *progress) finish() {
	if p.bar != nil {
		_ = p.bar.Finish()
		fmt.Fprintln(p.w)
		return
	}
	p.line()
}
