package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
)

// WriteTable writes the report as the tables BENCHMARKS.md quotes.
func (r *Report) WriteTable(w io.Writer) error {
	fmt.Fprintf(w, "Raw synced publish (the limit): %d publishers, %d B: before %.0f msg/s (p99 %.1f ms), after %.0f msg/s (p99 %.1f ms); mean %.0f msg/s, p99 %.1f ms\n\n",
		r.opts.Clients, r.opts.Size, r.Limit.Before.Rate, r.Limit.Before.P99, r.Limit.After.Rate, r.Limit.After.P99, r.Limit.Rate, r.Limit.P99)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "workload\tclients\tkeys\treq/s\tp50 ms\tp99 ms\tsynced writes/req\tratio\tp99 ratio\terrors")
	for _, s := range r.Service {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.0f\t%.1f\t%.1f\t%.2f\t%.2f×\t%.1f×\t%d\n", s.Name, s.Clients, s.Keys, s.Rate, s.P50, s.P99, s.SyncedWrites, s.Ratio, s.P99Ratio, s.Errors)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, s := range r.Service {
		if s.FirstError != "" {
			fmt.Fprintf(w, "first error of %s (%d keys): %s\n", s.Name, s.Keys, s.FirstError)
		}
	}
	return nil
}

// WriteJSON writes the report as JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}
