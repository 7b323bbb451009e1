package main

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/etcdmedic/etcdmedic"

	"github.com/dustin/go-humanize"

	"github.com/etcdmedic/etcdmedic/datadir"
	"github.com/etcdmedic/etcdmedic/deployment"
	"github.com/etcdmedic/etcdmedic/finding"
)

func (tablePrinter) Inspect(w io.Writer, r inspectResult) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	row := func(k, format string, a ...any) { fmt.Fprintf(tw, "%s\t%s\n", k, fmt.Sprintf(format, a...)) }
	row("DATA DIR", "%s", r.Path)
	if r.WALDir != "" && r.MemberDir != "" && r.WALDir != filepath.Join(r.MemberDir, "wal") {
		row("WAL DIR", "%s (apart from the data dir: etcd's --wal-dir)", r.WALDir)
	}
	if d := r.Deployment; d != nil {
		row("RUN AS", "%s", runnerOf(d.Runs))
		row("", "data dir from %s; WAL dir from %s", d.Origins["data-dir"], orDefault(d.Origins["wal-dir"], "default (member/wal)"))
	}
	row("KIND", "%s", r.Kind)
	if r.KindReason != "" {
		row("", "%s", r.KindReason)
	}
	if id := r.Identity; id != nil {
		row("CLUSTER ID", "%s", id.ClusterID)
		row("MEMBER ID", "%s", id.MemberID)
		row("NAME", "%s", orDash(id.Name))
		row("PEER URLS", "%s", orDash(strings.Join(id.PeerURLs, ",")))
	}
	if lc := r.LiveCopy; lc != nil {
		row("LIVE COPY", "%s: %s", lc.Endpoint, lc.Note)
	}
	if j := r.PDJoin; j != nil {
		row("PD JOIN", "%s (modified %s, %ds ago)", j.Contents, j.ModTime.Format("2006-01-02T15:04:05Z"), j.AgeSec)
	}
	if rf := r.Raft; rf != nil {
		row("HARD STATE", "term %d, vote %s, commit %d", rf.HardState.Term, idOrDash(rf.HardState.Vote), rf.HardState.Commit)
		row("RAFT LOG", "first index %d, last index %d (term %d), %d entries", rf.FirstIndex, rf.LastIndex, rf.LastTerm, rf.Entries)
		row("WAL", "%d segment(s), %s", rf.WALSegments, humanize.IBytes(uint64(rf.WALBytes)))
		if rf.Tail != nil {
			row("WAL TAIL", "%s at %s offset %d: %s", rf.Tail.Kind, rf.Tail.Segment, rf.Tail.Offset, rf.Tail.Detail)
		}
		if s := rf.Snapshot; s != nil {
			row("SNAPSHOT", "%s: index %d, term %d, voters %s, learners %s", s.File, s.Index, s.Term, ids(s.ConfState.Voters), ids(s.ConfState.Learners))
		} else {
			row("SNAPSHOT", "none")
		}
		if len(rf.PendingSnapshotDBs) > 0 {
			row("PENDING SNAPSHOT DB", "%s", strings.Join(rf.PendingSnapshotDBs, ","))
		}
	}
	if be := r.Backend; be != nil {
		row("DB", "%s (file %s, page size %d)", humanize.IBytes(uint64(be.SizeBytes)), humanize.IBytes(uint64(be.FileBytes)), be.PageSize)
		row("CONSISTENT INDEX", "%d (term %d)", be.ConsistentIndex, be.Term)
		row("REVISION", "%d (compacted %d)", be.Revision, be.CompactedRevision)
		row("CLUSTER VERSION", "%s", orDash(be.ClusterVersion))
		row("STORAGE VERSION", "%s", orDash(be.StorageVersion))
		if be.ConfState != nil {
			row("RAFT CONF STATE", "voters %s, learners %s", ids(be.ConfState.Voters), ids(be.ConfState.Learners))
		}
		alarms := "none"
		if len(be.Alarms) > 0 {
			var as []string
			for _, a := range be.Alarms {
				as = append(as, a.Alarm+"@"+a.MemberID.String())
			}
			alarms = strings.Join(as, ",")
		}
		row("ALARMS", "%s", alarms)
		if d := be.Deep; d != nil {
			row("DB SIZE IN USE", "%s, %d keys, %d page problem(s)", humanize.IBytes(uint64(d.SizeInUseBytes)), d.Keys, max(d.PageErrorCount, len(d.PageErrors)))
		}
	} else if r.BackendError != "" {
		row("DB", "unreadable: %s", r.BackendError)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if ms := r.Membership; ms != nil {
		fmt.Fprintln(w)
		printMembership(w, ms)
	}
	fmt.Fprintln(w)
	printFindings(w, r.Findings)
	return nil
}

// printMembership shows both stores side by side, one row per member ID.
func printMembership(w io.Writer, ms *datadir.Membership) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "MEMBER ID\tNAME (v2/v3)\tPEER URLS\tCLIENT URLS\tLEARNER v2\tLEARNER v3\tRAFT")
	seen := map[etcdmedic.ID]bool{}
	var all []etcdmedic.ID
	for _, list := range [][]etcdmedic.Member{ms.V2, ms.V3} {
		for _, m := range list {
			if !seen[m.ID] {
				seen[m.ID] = true
				all = append(all, m.ID)
			}
		}
	}
	for _, id := range all {
		v2, v3 := etcdmedic.Find(ms.V2, id), etcdmedic.Find(ms.V3, id)
		any := v3
		if any == nil {
			any = v2
		}
		fmt.Fprintf(tw, "%s\t%s/%s\t%s\t%s\t%s\t%s\t%s\n", id,
			orDash(nameOf(v2)), orDash(nameOf(v3)),
			orDash(strings.Join(any.PeerURLs, ",")), orDash(strings.Join(any.ClientURLs, ",")),
			learnerOf(v2), learnerOf(v3), raftRole(ms, id))
	}
	tw.Flush()
	for _, id := range ms.V2Removed {
		fmt.Fprintf(w, "removed (v2): %s\n", id)
	}
	for _, id := range ms.V3Removed {
		fmt.Fprintf(w, "removed (v3): %s\n", id)
	}
}

func nameOf(m *etcdmedic.Member) string {
	if m == nil {
		return "(absent)"
	}
	return m.Name
}

func learnerOf(m *etcdmedic.Member) string {
	if m == nil {
		return "(absent)"
	}
	return fmt.Sprint(m.IsLearner)
}

func raftRole(ms *datadir.Membership, id etcdmedic.ID) string {
	cs := ms.RaftConfState
	if cs == nil {
		return "-"
	}
	for _, v := range cs.Voters {
		if v == id {
			return "voter"
		}
	}
	for _, l := range cs.Learners {
		if l == id {
			return "learner"
		}
	}
	return "absent"
}

// printFindings writes each finding as a block an operator can act on.
func printFindings(w io.Writer, fs []finding.Finding) {
	if len(fs) == 0 {
		fmt.Fprintln(w, "FINDINGS: none")
		return
	}
	fmt.Fprintf(w, "FINDINGS: %d\n", len(fs))
	for _, f := range fs {
		fmt.Fprintf(w, "\n[%s] %s: %s\n", strings.ToUpper(string(f.Severity)), f.ID, f.Summary)
		for _, e := range f.Evidence {
			fmt.Fprintf(w, "  seen:   %s = %s\n", e.What, e.Value)
		}
		fmt.Fprintf(w, "  why:    %s\n", f.Why)
		fmt.Fprintf(w, "  remedy: %s\n", f.Remedy)
	}
}

func ids(list []etcdmedic.ID) string {
	if len(list) == 0 {
		return "[]"
	}
	parts := make([]string, len(list))
	for i, id := range list {
		parts[i] = id.String()
	}
	return "[" + strings.Join(parts, ",") + "]"
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// runnerOf says how a member is run, as the deployment was read.
func runnerOf(r deployment.Runner) string {
	switch r.Kind {
	case deployment.Systemd:
		return "systemd unit " + r.Unit + " (" + r.Stop + " / " + r.Start + ")"
	case deployment.StaticPod:
		return "kubeadm static pod " + r.Manifest
	case deployment.Process:
		return fmt.Sprintf("process %d: %s", r.PID, strings.Join(r.Command, " "))
	}
	return strings.Join(r.Command, " ")
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
