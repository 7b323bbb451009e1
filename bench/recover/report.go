package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/etcdmedic/etcdmedic/bench/internal/dataset"
)

// report prints, per size, the median wall time of each tool, their ratio, and the median of
// each step, as markdown.
func report(w io.Writer, cfg config, results []sizeResult) {
	fmt.Fprintf(w, "\n## Quorum-loss recovery: etcdmedic vs the manual script (etcd %s, 3 members, %d runs each, alternating)\n\n", cfg.version, cfg.runs)
	fmt.Fprintln(w, "| db size | data dirs | manual script (no backup) | etcdmedic (verified backups) | ratio | acknowledged keys kept |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|")
	for _, r := range results {
		s, m := median(walls(r.script)), median(walls(r.medic))
		fmt.Fprintf(w, "| %s | %d MiB | %s | %s | %.2f | %d of %d, every run |\n", dataset.FormatSize(r.set.TargetBytes), r.set.DataBytes>>20,
			secs(s), secs(m), m.Seconds()/s.Seconds(), r.keysAfterEvery, r.set.Keys)
	}
	fmt.Fprintf(w, "\n### Write outage: quorum loss to the first write the repaired cluster took (%d workload clients, each history checked)\n\n", outageClients)
	fmt.Fprintln(w, "| db size | manual script | etcdmedic | ratio | runs: script; etcdmedic |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---|")
	for _, r := range results {
		s, m := median(outages(r.script)), median(outages(r.medic))
		fmt.Fprintf(w, "| %s | %s | %s | %.2f | %s; %s |\n", dataset.FormatSize(r.set.TargetBytes), secs(s), secs(m), m.Seconds()/s.Seconds(),
			list(outages(r.script)), list(outages(r.medic)))
	}
	for _, r := range results {
		fmt.Fprintf(w, "\n### %s: median of each step (runs: script %s; etcdmedic %s)\n\n", dataset.FormatSize(r.set.TargetBytes), list(walls(r.script)), list(walls(r.medic)))
		fmt.Fprintln(w, "| manual script step | median | etcdmedic step | median |")
		fmt.Fprintln(w, "|---|---:|---|---:|")
		ss, ms := stepMedians(r.script), stepMedians(r.medic)
		for i := range max(len(ss), len(ms)) {
			var a, b string = "|", "|"
			if i < len(ss) {
				a = fmt.Sprintf("%s | %s", ss[i].name, secs(ss[i].took))
			}
			if i < len(ms) {
				b = fmt.Sprintf("%s | %s", ms[i].name, secs(ms[i].took))
			}
			fmt.Fprintf(w, "| %s | %s |\n", a, b)
		}
	}
}

func outages(ss []sample) []time.Duration {
	var out []time.Duration
	for _, s := range ss {
		out = append(out, s.outage)
	}
	return out
}

func walls(ss []sample) []time.Duration {
	var out []time.Duration
	for _, s := range ss {
		out = append(out, s.wall)
	}
	return out
}

// stepMedians is each step's median over the runs, in the order of the first run.
func stepMedians(ss []sample) []stepTime {
	if len(ss) == 0 {
		return nil
	}
	var out []stepTime
	for _, first := range ss[0].steps {
		var ds []time.Duration
		for _, s := range ss {
			for _, st := range s.steps {
				if st.name == first.name {
					ds = append(ds, st.took)
				}
			}
		}
		out = append(out, stepTime{first.name, median(ds)})
	}
	return out
}

func secs(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) }

func list(ds []time.Duration) string {
	var parts []string
	for _, d := range ds {
		parts = append(parts, fmt.Sprintf("%.1f", d.Seconds()))
	}
	return strings.Join(parts, ", ") + " s"
}
