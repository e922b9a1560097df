package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
)

// WriteTable writes the report as tables, the source of BENCHMARKS.md's "Current figures".
func (r *Report) WriteTable(w io.Writer) error {
	fmt.Fprintf(w, "Raw synced publish (the limit): %d publishers, %d B: before %.0f msg/s (p99 %.1f ms), after %.0f msg/s (p99 %.1f ms); mean %.0f msg/s, p99 %.1f ms; %.0f µs of CPU a message, %.2f cores busy\n\n",
		r.opts.Clients, r.opts.Size, r.Limit.Before.Rate, r.Limit.Before.P99, r.Limit.After.Rate, r.Limit.After.P99, r.Limit.Rate, r.Limit.P99, r.Limit.CPUMicros, r.Limit.Cores)
	if len(r.Service) > 0 {
		if err := r.writeService(w); err != nil {
			return err
		}
	}
	if r.Read != nil {
		return r.Read.write(w)
	}
	return nil
}

func (r *Report) writeService(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "workload\tclients\tkeys\treq/s\tp50 ms\tp99 ms\tsynced writes/req\tCPU µs/req\tratio\tp99 ratio\terrors")
	rows := append(slices.Clone(r.Service), r.Floor...)
	for _, s := range rows {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.0f\t%.1f\t%.1f\t%.2f\t%.0f\t%.2f×\t%.1f×\t%d\n", s.Name, s.Clients, s.Keys, s.Rate, s.P50, s.P99, s.SyncedWrites, s.CPUMicros, s.Ratio, s.P99Ratio, s.Errors)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, s := range rows {
		if s.FirstError != "" {
			fmt.Fprintf(w, "first error of %s (%d keys): %s\n", s.Name, s.Keys, s.FirstError)
		}
	}
	if err := r.writeOneClient(w); err != nil {
		return err
	}
	if err := r.writePaced(w); err != nil {
		return err
	}
	return r.writeCluster(w)
}

// writePaced writes the paced workloads.
func (r *Report) writePaced(w io.Writer) error {
	if len(r.Paced) == 0 {
		return nil
	}
	fmt.Fprintf(w, "\nPaced on one key, an open loop at %.0f requests a second for %s:\n\n", r.opts.PacedRate, r.opts.PacedDuration)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "workload\trequests\treq/s\tp50 ms\tp99 ms\tmax ms\tover 100 ms\terrors\tskipped")
	rows := r.Paced
	if r.PacedFloor != nil {
		rows = append(slices.Clone(rows), *r.PacedFloor)
	}
	for _, p := range rows {
		fmt.Fprintf(tw, "%s\t%d\t%.0f\t%.2f\t%.2f\t%.1f\t%d\t%d\t%d\n", p.Name, p.Requests, p.Rate, p.P50, p.P99, p.Max, p.Slow, p.Errors, p.Skipped)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, p := range r.Paced {
		fmt.Fprintf(w, "\nStages of %s, paced:\n", p.Name)
		if err := writeStages(w, p.Stages); err != nil {
			return err
		}
	}
	return nil
}

// writeCluster writes the workloads on the cluster.
func (r *Report) writeCluster(w io.Writer) error {
	if len(r.Cluster) == 0 {
		return nil
	}
	fmt.Fprintf(w, "\nOn a 3-node cluster in this process (3 replicas, every write synced), the clients spread over the instances:\n\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "workload\tinstances\tclients\tkeys\treq/s\tp50 ms\tp99 ms\tCPU µs/req\tappend conflicts/req\terrors")
	for _, c := range r.Cluster {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%.0f\t%.1f\t%.1f\t%.0f\t%.3f\t%d\n", c.Name, c.Instances, c.Clients, c.Keys, c.Rate, c.P50, c.P99, c.CPUMicros, c.Conflicts, c.Errors)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, c := range r.Cluster {
		if c.FirstError != "" {
			fmt.Fprintf(w, "first error of %s on %d instance(s), %d keys: %s\n", c.Name, c.Instances, c.Keys, c.FirstError)
		}
	}
	return nil
}

// writeOneClient writes each workload at one client beside the floor's,
// and its stages.
func (r *Report) writeOneClient(w io.Writer) error {
	f := r.FloorOneClient
	if f == nil || len(r.OneClient) == 0 {
		return nil
	}
	fmt.Fprintf(w, "\nOne client on one key, beside the floor's (p50 %.2f ms, %.0f µs of CPU a request):\n\n", f.P50, f.CPUMicros)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "workload\treq/s\tp50 ms\tp99 ms\tCPU µs/req\tp50 / floor's\tCPU / floor's\terrors")
	for _, o := range r.OneClient {
		fmt.Fprintf(tw, "%s\t%.0f\t%.2f\t%.2f\t%.0f\t%.2f×\t%.2f×\t%d\n", o.Name, o.Rate, o.P50, o.P99, o.CPUMicros, o.P50OverFloor, o.CPUOverFloor, o.Errors)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, o := range r.OneClient {
		fmt.Fprintf(w, "\nStages of %s, one client (spans a request had, nested: a use case holds its append):\n", o.Name)
		if err := writeStages(w, o.Stages); err != nil {
			return err
		}
	}
	return nil
}

// writeStages writes a stage breakdown.
func writeStages(w io.Writer, stages []Stage) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  stage\tper request\tp50 ms\tp99 ms\tmax ms\tmean ms")
	for _, s := range stages {
		fmt.Fprintf(tw, "  %s\t%.2f\t%.3f\t%.3f\t%.1f\t%.3f\n", s.Name, s.PerRequest, s.P50, s.P99, s.Max, s.Mean)
	}
	return tw.Flush()
}

// write writes the read side: one column per ledger size.
func (rr *ReadReport) write(w io.Writer) error {
	fmt.Fprintf(w, "\nRead side, %d partners (a tenth of the events are the big partner's, whose feed is read):\n\n", rr.Partners)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(name string, cell func(s ReadSize) string) {
		fmt.Fprint(tw, name)
		for _, s := range rr.Sizes {
			fmt.Fprint(tw, "\t"+cell(s))
		}
		fmt.Fprintln(tw)
	}
	f := fmt.Sprintf
	row("figure", func(s ReadSize) string { return f("%d public events (%d messages)", s.Events, s.Messages) })
	row("fill (unsynced)", func(s ReadSize) string { return f("%.1f s (%.0f msg/s)", s.FillSeconds, s.FillRate) })
	row("projector catch-up", func(s ReadSize) string {
		return f("%.1f s (%.0f msg/s)", s.CatchUpSeconds, s.CatchUpRate)
	})
	row("service start, fan-out caught up", func(s ReadSize) string { return f("%.1f s", s.StartSeconds) })
	row("page at a random cursor, p50 / p99", func(s ReadSize) string {
		return f("%.1f / %.1f ms (p99 %.1f× limit's; %d pages, %d errors)", s.Page.P50, s.Page.P99, s.PageP99Ratio, s.Page.Requests, s.Page.Errors)
	})
	row("walk (limit 100) vs raw ordered read", func(s ReadSize) string {
		return f("%.0f vs %.0f events/s = %.2f× (%d events)", s.WalkRate, s.RawRate, s.WalkRatio, s.WalkEvents)
	})
	row("dispatch burst vs bare signed POSTs", func(s ReadSize) string {
		d := s.Dispatch
		ratios := make([]string, len(d.Rounds))
		for i, r := range d.Rounds {
			ratios[i] = f("%.3f", r.Ratio)
		}
		return f("%.0f vs %.0f/s = %.3f× (median of %d rounds: %s; %d deliveries each, %d at once; CPU %.0f vs %.0f µs a POST = %.3f×)", d.BurstRate, d.BareRate, d.Ratio, len(d.Rounds), strings.Join(ratios, ", "), d.BurstEvents, d.Concurrency, d.BurstCPU, d.BareCPU, d.BareCPU/d.BurstCPU)
	})
	row("the bare POSTs fed from the ledger (durable read, ack each; ordered read beside)", func(s ReadSize) string {
		d := s.Dispatch
		return f("%.0f/s = %.3f× the bare loop; the burst %.3f× this (medians; CPU %.0f µs a POST)", d.FedRate, d.FedOverBare, d.BurstOverFed, d.FedCPU)
	})
	row("peak of appends flowing to deliveries", func(s ReadSize) string {
		return f("%.0f deliveries/s (%.0f appends/s)", s.Dispatch.FlowPeak, s.Dispatch.FlowAppends)
	})
	row("append → delivered, p50 / p99", func(s ReadSize) string {
		d := s.Dispatch
		return f("%.1f / %.1f ms at %.0f/s (p99 %.1f× limit's; %d events, %d errors, %d skipped)", d.Paced.P50, d.Paced.P99, d.PacedTarget, d.PacedP99Ratio, d.Paced.Requests, d.Paced.Errors, d.PacedSkipped)
	})
	row("raw append → read at the same pace, p50 / p99", func(s ReadSize) string {
		d := s.Dispatch
		return f("%.2f / %.2f ms (%d appends, %d failed or not read, %d skipped; the service's p99 %.1f× this)", d.RawPaced.P50, d.RawPaced.P99, d.RawPaced.Requests, d.RawPaced.Errors, d.RawPacedSkipped, d.PacedOverRaw)
	})
	row("replay vs raw ordered read", func(s ReadSize) string {
		return f("%.0f vs %.0f events/s = %.2f× (%d events; its deposit runs merged %.2f s after, serving)", s.ReplayRate, s.RawStreamRate, s.ReplayRatio, s.ReplayEvents, s.ReplayMergeSeconds)
	})
	row("VmHWM of the bench's process (service, fill, catch-up, clients, receiver)", func(s ReadSize) string { return f("%.0f MiB", s.HWM) })
	row("serve in its own process: VmRSS / VmHWM", func(s ReadSize) string {
		return f("%.0f / %.0f MiB (Go heap in use %.0f MiB, %.0f MiB after a collection; ready in %.1f s, then %d random-cursor pages)", s.ServeRSS, s.ServeHWM, s.ServeHeapInuse, s.ServeLiveHeap, s.ServeStartSeconds, s.ServePages)
	})
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\npage p99 growth from the small to the large size: %.2f×\n", rr.PageP99Growth)
	for _, s := range rr.Sizes {
		if s.Page.FirstError != "" {
			fmt.Fprintf(w, "first page error at %d events: %s\n", s.Events, s.Page.FirstError)
		}
		if s.Dispatch.Paced.FirstError != "" {
			fmt.Fprintf(w, "first paced append error at %d events: %s\n", s.Events, s.Dispatch.Paced.FirstError)
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
