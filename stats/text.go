package stats

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/dustin/go-humanize"
)

// TextOptions tunes WriteText. The zero value works.
type TextOptions struct {
	// Epochs is how many of the latest epoch rows to show (0: 20, <0: all).
	Epochs int
}

// WriteText writes s as a readable summary: totals, per-epoch rows, cache
// fill per tier, the top files by stall and the what-if section.
func WriteText(w io.Writer, s Snapshot, o TextOptions) error {
	bw := bufio.NewWriter(w)
	tw := tabwriter.NewWriter(bw, 0, 4, 2, ' ', 0)
	p := func(format string, a ...any) { fmt.Fprintf(tw, format, a...) }

	t := s.Totals
	p("stallfs stats\t%s\n", s.Time.Format(time.RFC3339))
	p("dataset\t%s files, %s\n", humanize.Comma(int64(s.Dataset.Files)), size(s.Dataset.Bytes))
	p("epoch\t%d\n", s.Epoch)
	p("read\t%s in %s reads over %s (%s)\n", size(t.Bytes), humanize.Comma(t.Reads),
		dur(t.Seconds), rate(float64(t.Bytes), t.Seconds))
	p("by source\tmemory %s  disk %s  peer %s  backend %s\n", size(t.BytesBySource.Memory),
		size(t.BytesBySource.Disk), size(t.BytesBySource.Peer), size(t.BytesBySource.Backend))
	p("hit rate\t%s\n", pct(t.HitRate))
	p("fetch stall\t%s summed over readers, %s of wall time with a reader waiting\n",
		dur(t.FetchStallSeconds), dur(t.StallWallSeconds))
	p("latency\tp50 %s  p99 %s  max %s\n", dur(t.LatencyP50Seconds), dur(t.LatencyP99Seconds),
		dur(t.LatencyMaxSeconds))
	p("backend\t%s requests, %s errors, %s retries\n", humanize.Comma(s.Backend.Requests),
		humanize.Comma(s.Backend.Errors), humanize.Comma(s.Backend.Retries))
	p("prefetch\t%s items (%s) fetched ahead; %s misses hidden, %s not hidden\n",
		humanize.Comma(s.Prefetch.FetchedItems), size(s.Prefetch.FetchedBytes),
		humanize.Comma(s.Prefetch.HiddenMisses), humanize.Comma(s.Prefetch.NotHiddenMisses))
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write stats: %w", err)
	}

	rows := s.Epochs
	n := o.Epochs
	if n == 0 {
		n = 20
	}
	if n > 0 && len(rows) > n {
		rows = rows[len(rows)-n:]
	}
	p("\nEPOCH\tSTART\tTIME\tFILES\tREAD\tRATE\tMEMORY\tDISK\tPEER\tBACKEND\tSTALL\tSTALL%%\tHIT\tOPTIMAL\tP50\tP99\tMAX\n")
	for _, e := range rows {
		num := strconv.FormatInt(e.Epoch, 10)
		if !e.Complete {
			num += "*"
		}
		p("%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", num,
			e.Start.Format(time.TimeOnly), dur(e.Seconds), humanize.Comma(e.Files), size(e.Bytes),
			rate(float64(e.Bytes), e.Seconds), size(e.BytesBySource.Memory), size(e.BytesBySource.Disk),
			size(e.BytesBySource.Peer), size(e.BytesBySource.Backend), dur(e.FetchStallSeconds),
			pct(e.StallShare), pct(e.HitRate), pct(e.OptimalHitRate), dur(e.LatencyP50Seconds),
			dur(e.LatencyP99Seconds), dur(e.LatencyMaxSeconds))
	}
	if len(s.Epochs) == 0 {
		p("(no reads yet)\n")
	} else if !s.Epochs[len(s.Epochs)-1].Complete {
		p("(* epoch in progress)\n")
	}

	p("\nCACHE TIER\tUSED\tBUDGET\tFILL\tITEMS\n")
	for _, c := range s.Cache.Tiers {
		p("%s\t%s\t%s\t%s\t%s\n", c.Tier, size(c.UsedBytes), size(c.BudgetBytes),
			pct(ratio(float64(c.UsedBytes), float64(c.BudgetBytes))), humanize.Comma(c.Items))
	}
	p("total budget\t\t%s\n", size(s.Cache.BudgetBytes))

	if len(s.Files) > 0 {
		p("\nSTALL\tREADS\tREAD\tSOURCE\tFIRST FETCH\tPATH\n")
		for _, f := range s.Files {
			first := "-"
			if f.FirstFetchEpoch != nil {
				first = "epoch " + strconv.FormatInt(*f.FirstFetchEpoch, 10)
			}
			p("%s\t%s\t%s\t%s\t%s\t%s\n", dur(f.StallSeconds), humanize.Comma(f.Reads), size(f.Bytes),
				f.Source, first, f.Path)
		}
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write stats: %w", err)
	}
	if err := writeWhatIf(tw, s.WhatIf); err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("write stats: %w", err)
	}
	return nil
}

// writeWhatIf writes the what-if section with its inputs.
func writeWhatIf(tw *tabwriter.Writer, w WhatIfResult) error {
	p := func(format string, a ...any) { fmt.Fprintf(tw, format, a...) }
	in := w.Inputs
	p("\nWHAT-IF\tT = D*x/C + D*(1-x)/S\n")
	p("  D dataset\t%s\n", size(in.DatasetBytes))
	p("  C cache rate\t%s\n", rateOr(in.CacheRate, "not measured (cache time counted as 0)"))
	p("  S backend rate\t%s\n", rateOr(in.BackendRate, "not measured"))
	p("  R consumer rate\t%s\n", rateOr(in.ConsumerRate, "not measured"))
	if !w.Valid {
		p("  (no prediction: the dataset size or the backend rate is unknown)\n")
		return flush(tw)
	}
	p("\n  CACHE\tx\tFETCH/EPOCH\tCONSUME/EPOCH\tSTALL/EPOCH\n")
	for i, r := range w.Rows {
		name := size(r.CacheBytes)
		if i == 0 {
			name += " (now)"
		}
		consume, stall := "-", "-"
		if r.ConsumeSeconds > 0 {
			consume, stall = dur(r.ConsumeSeconds), dur(r.StallSeconds)
		}
		p("  %s\t%s\t%s\t%s\t%s\n", name, pct(r.Fraction), dur(r.FetchSeconds), consume, stall)
	}
	switch {
	case !w.StallFreeKnown:
		p("  stall-free cache: unknown (no consumer rate; pass --consumer-rate)\n")
	case !w.StallFreeReachable:
		p("  stall-free cache: not reachable, even a full cache fetches slower than the consumer reads\n")
	default:
		p("  stall-free cache: %s (%s of the dataset)\n", size(w.StallFreeBytes), pct(w.StallFreeFraction))
	}
	return flush(tw)
}

func flush(tw *tabwriter.Writer) error {
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write stats: %w", err)
	}
	return nil
}

func size(b int64) string {
	if b < 0 {
		return "-" + humanize.IBytes(uint64(-b))
	}
	return humanize.IBytes(uint64(b))
}

func rate(bytes, seconds float64) string {
	if seconds <= 0 {
		return "-"
	}
	return humanize.IBytes(uint64(bytes/seconds)) + "/s"
}

func rateOr(r float64, none string) string {
	if r <= 0 {
		return none
	}
	return humanize.IBytes(uint64(r)) + "/s"
}

func pct(f float64) string { return strconv.FormatFloat(100*f, 'f', 1, 64) + "%" }

// dur renders seconds with a precision that suits their magnitude.
func dur(s float64) string {
	d := time.Duration(s * 1e9)
	switch {
	case d == 0:
		return "0s"
	case d < time.Millisecond:
		return d.Round(time.Microsecond).String()
	case d < time.Second:
		return d.Round(100 * time.Microsecond).String()
	case d < time.Minute:
		return d.Round(10 * time.Millisecond).String()
	default:
		return d.Round(time.Second).String()
	}
}
