package main

import (
	"fmt"
	"io"
	"text/tabwriter"

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
	fmt.Fprintln(w)
	for i, s := range p.Steps {
		fmt.Fprintf(w, "%2d. %s\n", i+1, s.Title)
	}
	return nil
}
