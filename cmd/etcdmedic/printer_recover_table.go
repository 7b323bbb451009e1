package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/etcdmedic/etcdmedic/recovery"
	"github.com/etcdmedic/etcdmedic/runtime"
	"github.com/etcdmedic/etcdmedic/runtime/runbook"
)

func (tablePrinter) RecoverPlan(w io.Writer, r recoverPlanResult) error {
	p := r.Plan
	a := p.Assessment
	fmt.Fprintf(w, "CLUSTER %s: quorum %s\n\nCANDIDATES (the survivor keeps its history; the others lose what it lacks)\n", p.ClusterID, a.Quorum)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tMEMBER ID\tCOMMIT\tAPPLIED\tTERM\tLAST INDEX\tREVISION\tSTANDING\tFOUND\tCHOICE")
	for _, c := range a.Candidates {
		choice := ""
		switch {
		case c.Name == p.Survivor && c.PastCommit() > 0:
			choice = fmt.Sprintf("SURVIVOR: the most up-to-date log; keeps its %d entries past its commit index", c.PastCommit())
		case c.Name == p.Survivor:
			choice = "SURVIVOR: the most up-to-date log"
		case c.OutOfMembership() && p.Member(c.Name).Name == "":
			choice = "left alone: not in the survivor's membership"
		case c.Rejected != "":
			choice = "rejected: " + c.Rejected
		case c.AheadIndex > 0 || c.AheadRevision > 0:
			choice = fmt.Sprintf("LOSES %d entries, %d revisions it has beyond the survivor", c.AheadIndex, c.AheadRevision)
		default:
			choice = fmt.Sprintf("rejoins fresh; it is %d entries, %d revisions behind (nothing lost)", c.IndexGap, c.RevisionGap)
		}
		found := orDash(c.Liveness.State)
		if c.StoppedByPlan != "" {
			found += ", stopped by plan"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t%s\n", c.Name, idOrDash(c.MemberID), c.Commit, c.ConsistentIndex, c.Term, c.LastIndex, c.Revision, orDash(c.Standing), found, choice)
	}
	tw.Flush()
	fmt.Fprintln(w, "\nHOW EACH MEMBER WAS FOUND (quorum is proven lost only by members shown down)")
	for _, c := range a.Candidates {
		fmt.Fprintf(w, "  %-12s %s: %s\n", c.Name, orDash(c.Liveness.State), c.Liveness.Evidence)
		if c.StoppedByPlan != "" {
			fmt.Fprintf(w, "  %-12s %s; then read from disk\n", "", c.StoppedByPlan)
		}
		if c.TailCut != "" && c.Rejected == "" {
			fmt.Fprintf(w, "  %-12s %s\n", "", c.TailCut)
		}
		if c.RealDataDir != "" && c.RealDataDir != c.DataDir {
			fmt.Fprintf(w, "  %-12s data dir %s is a link to %s: backed up and quarantined there\n", "", c.DataDir, c.RealDataDir)
		}
	}
	if a.SurvivorBackup != "" {
		fmt.Fprintf(w, "SURVIVOR BACKED UP while plan watched the members it stopped: %s (verified; apply uses it while %s's data dir stays unchanged)\n", a.SurvivorBackup, p.Survivor)
	}
	for _, l := range p.LeftOut {
		fmt.Fprintf(w, "LEFT ALONE: %s (%s): %s\n", l.Name, l.DataDir, l.Reason)
	}
	for _, warn := range a.Warnings {
		fmt.Fprintf(w, "WARNING: %s\n", warn)
	}
	if src := p.FromSnapshot; src != nil {
		fmt.Fprintf(w, "\nREBUILD FROM SNAPSHOT %s (revision %d, %d bytes, sha256 %s)", src.Path, src.Revision, src.Bytes, src.SHA256)
		if src.BumpRevision > 0 {
			fmt.Fprintf(w, ", revisions bumped by %d, compacted: %v", src.BumpRevision, src.MarkCompacted)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w, "\nHOW EACH MEMBER IS RUN (and the exact command line it is started with)")
	for _, m := range p.Members {
		fmt.Fprintf(w, "  %-12s %s\n", m.Name, runtimeOf(m))
		fmt.Fprintf(w, "  %-12s %s\n", "", recoverStartOf(p, m))
	}
	printMemberEnviron(w, p.PassEnv)
	fmt.Fprintf(w, "\nPLAN (%s/plan.json; apply with: etcdmedic recover apply %s --yes)\n", r.PlanDir, r.PlanDir)
	for i, s := range p.Steps {
		fmt.Fprintf(w, "%2d. %s\n", i+1, s.Title)
	}
	return nil
}

func (tablePrinter) RecoverApply(w io.Writer, r recoverApplyResult) error {
	rep := r.Report
	fmt.Fprintln(w, "STEP TIMINGS")
	for _, t := range rep.Timings {
		if t.Skipped {
			fmt.Fprintf(w, "  %-24s done in an earlier run\n", t.Step)
		} else {
			fmt.Fprintf(w, "  %-24s %s\n", t.Step, t.Duration.Round(10_000_000))
		}
	}
	fmt.Fprintf(w, "TOOK         %s\nBACKUPS      %s\n", rep.Took.Round(10_000_000), rep.BackupDir)
	for _, q := range rep.Quarantines {
		fmt.Fprintf(w, "QUARANTINED  %s\n", q)
	}
	if rep.Revision > 0 {
		fmt.Fprintf(w, "REVISION     %d; hashes %v\n", rep.Revision, rep.Hashes)
	}
	if len(rep.Findings) > 0 {
		printFindings(w, rep.Findings)
	}
	return nil
}

// runtimeOf says how apply stops and starts a member.
func runtimeOf(m recovery.PlanMember) string {
	switch {
	case m.KubeadmJoin:
		return "printed runbook: you run the commands on the node (kubeadm reset + kubeadm join --control-plane); each checkpoint is checked over the etcd API"
	case m.Runbook != "":
		return fmt.Sprintf("printed runbook (%s): you run the commands on the node; each checkpoint is checked over the etcd API", m.Runbook)
	case m.Manifest != "":
		return "kubeadm static pod " + m.Manifest + " (moved out of kubelet's folder to stop, edited and put back to start)"
	case m.SystemdUnit != "":
		return "systemd unit " + m.SystemdUnit + " (stopped with systemctl stop; the recovery runs it as a local process: hand it back to the unit afterwards)"
	}
	return "local process (data dir " + m.DataDir + ")"
}

// recoverStartOf is how apply starts m, as the review shows it: for a process etcdmedic starts,
// its whole argv (the plan's etcdCommand and etcdFlags are what apply runs, so the operator
// reads them here before --yes).
func recoverStartOf(p *recovery.Plan, m recovery.PlanMember) string {
	spec := runtime.MemberSpec{Name: m.Name, DataDir: m.DataDir, ClientURLs: m.ClientURLs, PeerURLs: m.PeerURLs,
		InitialCluster: rejoinInitialCluster(p, m), ClusterState: "existing", ExtraFlags: p.EtcdFlags}
	note := ""
	switch {
	case m.Name == p.Survivor && p.FromSnapshot != nil:
		spec.ClusterState = "new" // the restored one-member cluster
	case m.Name == p.Survivor && m.Runbook != "":
		note = " (first once more with --force-new-cluster, for a few seconds)"
	case m.Name != p.Survivor:
		note = " (--initial-cluster: the rebuilt cluster's members when it joins, in etcd's order)"
	}
	switch {
	case m.KubeadmJoin:
		return "start: by kubeadm join --control-plane on its node (kubelet runs the etcd manifest kubeadm writes)"
	case m.Manifest != "":
		return fmt.Sprintf("start: kubelet runs the manifest's own command, only --initial-cluster=%s --initial-cluster-state=%s set%s (the plan's etcd flags are not added)",
			spec.InitialCluster, spec.ClusterState, note)
	case m.Runbook != "":
		command := strings.Join(p.EtcdCommand, " ")
		if command == "" {
			command = "etcd"
		}
		return fmt.Sprintf("start: you run, on its node, in your shell's environment: %s %s%s", command, shellLine(spec.Flags()), note)
	}
	command := p.EtcdCommand
	if len(command) == 0 {
		linked, err := linkedEtcdCommandLine()
		if err != nil {
			linked = []string{"etcdmedic", linkedEtcdCommand}
		}
		command = linked
	}
	return fmt.Sprintf("start: %s%s", shellLine(append(append([]string{}, command...), spec.Flags()...)), note)
}

// rejoinInitialCluster is m's --initial-cluster: the survivor alone for the survivor; for a
// member that rejoins, the survivor, the members that rejoined before it, then m.
func rejoinInitialCluster(p *recovery.Plan, m recovery.PlanMember) string {
	var parts []string
	add := func(o recovery.PlanMember) {
		for _, u := range o.PeerURLs {
			parts = append(parts, o.Name+"="+u)
		}
	}
	add(p.Member(p.Survivor))
	if m.Name == p.Survivor {
		return strings.Join(parts, ",")
	}
	for _, o := range p.Members {
		if o.Name == p.Survivor {
			continue
		}
		add(o)
		if o.Name == m.Name {
			break
		}
	}
	return strings.Join(parts, ",")
}

// shellLine is argv as one shell line, each argument quoted where it has to be.
func shellLine(argv []string) string {
	out := make([]string, len(argv))
	for i, a := range argv {
		out[i] = runbook.Quote(a)
	}
	return strings.Join(out, " ")
}

// printMemberEnviron shows the whole environment of every member etcdmedic starts as a local
// process (runtime.EnvironOf): the base variables of the shell running apply, then the ETCD_*
// ones the plan records as passed on purpose (--pass-env). Nothing else reaches a member.
func printMemberEnviron(w io.Writer, passed []string) {
	fmt.Fprintln(w, "\nENVIRONMENT of every member started as a local process (nothing else is passed: no ETCDCTL_*, no ETCD_* but those given with --pass-env)")
	for _, kv := range runtime.EnvironOf(passed) {
		fmt.Fprintf(w, "  %s\n", kv)
	}
}
