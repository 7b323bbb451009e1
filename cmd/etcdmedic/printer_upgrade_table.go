package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/etcdmedic/etcdmedic/runtime"
	"github.com/etcdmedic/etcdmedic/runtime/runbook"
	"github.com/etcdmedic/etcdmedic/upgrade"
)

func (tablePrinter) UpgradeCheck(w io.Writer, r *upgrade.Report) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "MEMBER\tVERSION\tSTORAGE VERSION\tMEMBERSHIP FROM\tDRIFT\tNOTE")
	for _, m := range r.Members {
		drift := "-"
		if m.Checked {
			drift = fmt.Sprint(len(m.Drifts))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", m.Name, orDash(m.Version), orDash(m.StorageVersion), m.Source, drift, orDash(m.Error))
	}
	tw.Flush()
	fmt.Fprintf(w, "\nUPGRADE TO %s: %s\n\n", r.Target, r.Verdict)
	printFindings(w, r.Findings)
	fmt.Fprintln(w, "\nPATH")
	for i, s := range r.Path {
		fmt.Fprintf(w, "%2d. %s\n", i+1, s)
	}
	return nil
}

func (tablePrinter) UpgradePlan(w io.Writer, p *upgrade.Plan) error {
	kind := "UPGRADE"
	if p.Downgrade != "" {
		kind = "DOWNGRADE"
	}
	fmt.Fprintf(w, "%s %s -> %s (check: %s)\n", kind, p.From, p.Target, p.Check.Verdict)
	for i, h := range p.Hops {
		fmt.Fprintf(w, "HOP %d  %s: %s\n", i+1, h.Version, h.Why)
	}
	fmt.Fprintln(w, "\nHOW EACH MEMBER IS RESTARTED (a local process; the exact command line of each hop)")
	for i, h := range p.Hops {
		for _, m := range p.Members {
			fmt.Fprintf(w, "  hop %d  %-12s %s\n", i+1, m.Name, shellLine(upgradeArgv(p, h, m)))
		}
	}
	if bin, ok := p.Binaries[p.From]; ok {
		// A member found down when apply starts (a reboot) is started on the version it was on.
		fmt.Fprintf(w, "  a member found down before its first hop starts again on %s, with the same flags\n", runbook.Quote(bin))
	}
	printMemberEnviron(w, p.PassEnv)
	fmt.Fprintln(w)
	for i, s := range p.Steps {
		fmt.Fprintf(w, "%2d. %s\n", i+1, s.Title)
	}
	return nil
}

func (tablePrinter) UpgradeApply(w io.Writer, r upgradeApplyResult) error {
	for _, t := range r.Report.Timings {
		if t.Skipped {
			fmt.Fprintf(w, "%-24s done in an earlier run\n", t.Step)
		} else {
			fmt.Fprintf(w, "%-24s %s\n", t.Step, t.Duration.Round(10*time.Millisecond))
		}
	}
	if r.Report.Upgraded {
		fmt.Fprintf(w, "upgraded to %s\n", r.Report.Target)
	}
	return nil
}

// upgradeArgv is the argv apply restarts m with on hop h: the hop's binary and the flags of
// every member as the plan records them, the plan's etcdFlags last.
func upgradeArgv(p *upgrade.Plan, h upgrade.Hop, m upgrade.Member) []string {
	var parts []string
	for _, o := range p.Members {
		for _, u := range o.PeerURLs {
			parts = append(parts, o.Name+"="+u)
		}
	}
	spec := runtime.MemberSpec{Name: m.Name, DataDir: m.DataDir, ClientURLs: m.ClientURLs, PeerURLs: m.PeerURLs,
		InitialCluster: strings.Join(parts, ","), ClusterState: "existing", ExtraFlags: p.EtcdFlags}
	return append([]string{p.Binaries[h.Version]}, spec.Flags()...)
}
