package main

import (
	"fmt"
	"io"
	"text/tabwriter"
)

func (tablePrinter) Drill(w io.Writer, r drillResult) error {
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "DRILL\tREPAIR\tTIME TO REPAIR\tACKED WRITES\tLOST\tWORKLOAD OPS\tWRITE OUTAGE\tHISTORY\tRESULT")
	for _, d := range r.Results {
		result := "PASSED"
		switch {
		case d.Skipped != "":
			result = "SKIPPED: " + d.Skipped
		case d.Stopped:
			result = "STOPPED"
		case !d.Passed:
			result = "FAILED"
		}
		ops, outage, verdict := "-", "-", "-"
		if c := d.Checked; c != nil {
			ops, outage, verdict = fmt.Sprintf("%d (%.0f/s)", c.Acked, c.OpsPerSec), fmt.Sprintf("%.1fs", c.WriteOutageSec), c.Verdict
		}
		fmt.Fprintf(tw, "%s\t%s\t%.1fs\t%d\t%d\t%s\t%s\t%s\t%s\n", d.Drill, orDash(d.Repair), d.RepairSec, d.Acked, d.Lost, ops, outage, verdict, result)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, d := range r.Results {
		if k := d.Kubernetes; k != nil {
			longest := 0.0
			for _, o := range k.Outages {
				longest = max(longest, o.NotReadySec)
			}
			fmt.Fprintf(w, "%s --kubernetes (kube-apiserver %s): %s; apiservers not ready for %.1fs at most\n", d.Drill, k.APIServerVersion, k.Verdict, longest)
		}
		if tl := d.TotalLoss; tl != nil {
			fmt.Fprintf(w, "%s: recovery point %.1fs before the loss (revision %d); %d writes acknowledged after it, gone with the disks; %d lost before it\n", d.Drill, tl.RecoveryPointSec, tl.CapturedRevision, tl.AckedAfterPoint, tl.LostBeforePoint)
		}
		if d.NaiveFailure != "" {
			fmt.Fprintf(w, "%s --naive: the in-place upgrade failed, as in incident 3: %s\n", d.Drill, d.NaiveFailure)
		}
	}
	return nil
}
