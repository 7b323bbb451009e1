package main

import (
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/etcdmedic/etcdmedic/bench/internal/dataset"
)

func median(ds []time.Duration) time.Duration {
	s := append([]time.Duration{}, ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

func percentile(ds []time.Duration, p float64) time.Duration {
	s := append([]time.Duration{}, ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[min(len(s)-1, int(p*float64(len(s))))]
}

func secs(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) }

func report(w io.Writer, cfg config, r *result) {
	fmt.Fprintf(w, "\n### Backups: etcd %s, one member, db %s, store SeaweedFS S3 on 127.0.0.1 (medians of %d alternating runs)\n\n", cfg.version, dataset.FormatSize(r.dbBytes), cfg.runs)
	fmt.Fprintln(w, "| | etcdmedic | by hand | ratio |")
	fmt.Fprintln(w, "|---|---:|---:|---:|")
	mf, hf := median(r.medicFull), median(r.manualFull)
	fmt.Fprintf(w, "| full backup into the bucket (etcdmedic backup now / etcdctl snapshot save + upload) | %s | %s | %.2f |\n", secs(mf), secs(hf), mf.Seconds()/hf.Seconds())
	fmt.Fprintf(w, "| bytes stored | %s (zstd) | %s | %.2f |\n", dataset.FormatSize(r.medicStored), dataset.FormatSize(r.manualStored), float64(r.medicStored)/float64(r.manualStored))
	mr, hr := median(r.medicRestore), median(r.manualRestore)
	fmt.Fprintf(w, "| restore of the full backup (etcdmedic restore: download, checks, etcdutl / etcdutl snapshot restore of a local file) | %s | %s | %.2f |\n", secs(mr), secs(hr), mr.Seconds()/hr.Seconds())
	mp := median(r.medicPITR)
	fmt.Fprintf(w, "| restore to the latest point: the full backup and %d revisions of history replayed | %s | (no equivalent) | |\n", r.replayed, secs(mp))
	fmt.Fprintf(w, "\nRecovery point under load (%.0f acknowledged writes a second for %d s, history stored every second): from a write's acknowledgement to its revision in the store, p50 %s, p99 %s, max %s over %d writes.\n",
		r.ackedPerSec, cfg.loadSeconds, secs(percentile(r.lags, 0.5)), secs(percentile(r.lags, 0.99)), secs(percentile(r.lags, 1)), len(r.lags))
}

// reportCost prints the capture's cost: medians over the runs, per load, without and with it.
func reportCost(w io.Writer, cfg config, r *costResult) {
	fmt.Fprintf(w, "\n### What the capture costs the cluster: etcd %s, one member, 16 writers of 256-byte values, %d s windows, medians of %d alternating runs\n\n", cfg.version, cfg.costSeconds, cfg.runs)
	fmt.Fprintln(w, "| load | measure | without backup run | with backup run | ratio |")
	fmt.Fprintln(w, "|---|---|---:|---:|---:|")
	for _, rate := range []int{cfg.rate, 0} {
		load := fmt.Sprintf("%d writes/s asked", rate)
		if rate == 0 {
			load = "as fast as the writers go"
		}
		var off, on []costWindow
		for _, cw := range r.windows {
			switch {
			case cw.rate != rate:
			case cw.capture:
				on = append(on, cw)
			default:
				off = append(off, cw)
			}
		}
		row := func(measure string, f func(costWindow) float64, format string) {
			a, b := medianOf(off, f), medianOf(on, f)
			fmt.Fprintf(w, "| %s | %s | "+format+" | "+format+" | %.2f |\n", load, measure, a, b, b/a)
		}
		row("acknowledged writes/s", func(c costWindow) float64 { return c.perSec }, "%.0f")
		row("p50 write latency (ms)", func(c costWindow) float64 { return ms(percentile(c.latencies, 0.5)) }, "%.2f")
		row("p99 write latency (ms)", func(c costWindow) float64 { return ms(percentile(c.latencies, 0.99)) }, "%.2f")
		row("etcd CPU per 10,000 writes (s)", func(c costWindow) float64 { return c.etcdCPU.Seconds() * 10000 / float64(c.acknowledge) }, "%.2f")
		b := medianOf(on, func(c costWindow) float64 { return c.captureCPU.Seconds() * 10000 / float64(c.acknowledge) })
		fmt.Fprintf(w, "| %s | backup run's own CPU per 10,000 writes (s) | | %.2f | |\n", load, b)
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func medianOf(ws []costWindow, f func(costWindow) float64) float64 {
	if len(ws) == 0 {
		return 0
	}
	v := make([]float64, len(ws))
	for i, w := range ws {
		v[i] = f(w)
	}
	sort.Float64s(v)
	return v[len(v)/2]
}
