package main

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/etcdmedic/etcdmedic/scan"
)

func (tablePrinter) Scan(w io.Writer, r *scan.Result) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PATH\tKIND\tCLUSTER ID\tMEMBER ID\tNAME\tLAST INDEX\tLAST WRITE\tUSED BY\tCLAIM")
	for _, f := range r.Found {
		claim := "-"
		switch {
		case f.InUse:
			claim = "IN USE (a running member holds it)"
		case f.Error != "":
			claim = "error: " + f.Error
		case f.Verdict != nil:
			claim = string(f.Verdict.Class)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n", f.Path, f.Kind, orDash(f.ClusterID), orDash(f.MemberID), orDash(f.Name), f.LastIndex, f.Modified.Format("2006-01-02T15:04:05Z"), usedBy(f), claim)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\n%d data dir(s) in %d directories visited", len(r.Found), r.Dirs)
	if len(r.Quarantines) > 0 {
		fmt.Fprintf(w, "; %d quarantine folder(s) left alone", len(r.Quarantines))
	}
	fmt.Fprintln(w)
	for _, s := range r.Skipped {
		fmt.Fprintf(w, "skipped: %s\n", s)
	}
	for _, s := range r.Outside {
		fmt.Fprintf(w, "outside the scanned paths, not followed: %s\n", s)
	}
	for _, s := range r.NotEntered {
		fmt.Fprintf(w, "not entered (a kernel filesystem): %s\n", s)
	}
	for _, f := range r.Found {
		if f.Verdict != nil && !f.Verdict.Safe {
			fmt.Fprintf(w, "%s: %s: %s\n", f.Verdict.Class, f.Path, f.Verdict.Reason)
		}
	}
	return nil
}

// usedBy names the process configured with a data dir, and its unit or pod.
func usedBy(f scan.Found) string {
	p := f.UsedBy
	if p == nil {
		return "-"
	}
	switch {
	case p.Unit != "":
		return fmt.Sprintf("pid %d (unit %s)", p.PID, p.Unit)
	case p.Pod:
		return fmt.Sprintf("pid %d (a Kubernetes pod)", p.PID)
	}
	return fmt.Sprintf("pid %d (%s)", p.PID, p.Command)
}
