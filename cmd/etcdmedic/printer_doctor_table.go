package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/etcdmedic/etcdmedic"

	"github.com/dustin/go-humanize"

	"github.com/etcdmedic/etcdmedic/cluster"
	"github.com/etcdmedic/etcdmedic/finding"
)

func (tablePrinter) Doctor(w io.Writer, r doctorResult) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ENDPOINT\tID\tNAME\tVERSION\tDB SIZE\tIN USE\tLEADER\tLEARNER\tRAFT TERM\tRAFT INDEX\tAPPLIED\tERRORS\tPROBLEM")
	problems := problemsBySubject(r.Findings)
	for _, m := range r.Members {
		endpoint := strings.Join(m.ClientURLs, ",")
		if m.Probe != nil {
			endpoint = m.Probe.Endpoint
		}
		row := []string{orDash(endpoint), m.ID.String(), orDash(m.Name)}
		row = append(row, statusCells(m.Probe, m.IsLearner)...)
		row = append(row, orDash(problems[m.Label()]))
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	for _, p := range r.Strangers {
		row := append([]string{p.Endpoint, p.Status.MemberID.String(), "(not a member)"}, statusCells(p, p.Status.IsLearner)...)
		fmt.Fprintln(tw, strings.Join(append(row, orDash(problems[p.Endpoint])), "\t"))
	}
	for _, p := range r.Unmatched {
		row := append([]string{p.Endpoint, "-", "(unknown)"}, statusCells(p, false)...)
		fmt.Fprintln(tw, strings.Join(append(row, orDash(problems[p.Endpoint])), "\t"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	q := r.Quorum
	leader := "none"
	if id := r.Leader(); id != etcdmedic.NoID {
		leader = r.Label(id)
	}
	unknown := "" // and cut off
	if q.CutOff > 0 {
		unknown += fmt.Sprintf(", %d cut off from the quorum", q.CutOff)
	}
	if q.Unknown > 0 {
		unknown = fmt.Sprintf(", %d not verified", q.Unknown)
	}
	fmt.Fprintf(w, "\nCLUSTER %s: %d of %d voters up (%d needed)%s, leader %s\n\n", idOrDash(r.ClusterID), q.VotersUp, q.Voters, q.Needed, unknown, leader)
	printFindings(w, r.Findings)
	return nil
}

func statusCells(p *cluster.Probe, learner bool) []string {
	if p == nil || !p.Reached {
		errText := "not probed"
		if p != nil {
			errText = p.Error
		}
		return []string{"-", "-", "-", "-", fmt.Sprint(learner), "-", "-", "-", errText}
	}
	st := p.Status
	return []string{
		st.Version, humanize.IBytes(uint64(st.DBSize)), humanize.IBytes(uint64(st.DBSizeInUse)),
		fmt.Sprint(st.Leader == st.MemberID), fmt.Sprint(st.IsLearner), fmt.Sprint(st.RaftTerm),
		fmt.Sprint(st.RaftIndex), fmt.Sprint(st.AppliedIndex), orDash(strings.Join(st.Errors, "; ")),
	}
}

// problemsBySubject is the PROBLEM column: the finding IDs about each member or endpoint.
func problemsBySubject(fs []finding.Finding) map[string]string {
	out := map[string]string{}
	for _, f := range fs {
		if out[f.Subject] != "" {
			out[f.Subject] += ","
		}
		out[f.Subject] += f.ID
	}
	return out
}
