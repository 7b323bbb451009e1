package main

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/etcdmedic/etcdmedic/datadir"
	"github.com/etcdmedic/etcdmedic/plan"
	"github.com/etcdmedic/etcdmedic/recovery"
	"github.com/etcdmedic/etcdmedic/runlock"
	"github.com/etcdmedic/etcdmedic/upgrade"
)

func newUpgradeCommand(opts *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "upgrade",
		Short: "Upgrade preflight: version hazards and membership drift (incident 3)",
	}
	cmd.AddCommand(newUpgradeCheckCommand(opts), newUpgradePlanCommand(opts), newUpgradeApplyCommand(opts))
	return cmd
}

func newUpgradeCheckCommand(opts *globalOptions) *cobra.Command {
	var cf connFlags
	var to, from string
	var dataDirs []string
	var deployed memberDeployments
	var fetch bool
	cmd := &cobra.Command{
		Use:   "check --to VERSION [--endpoints ... [--fetch-backends]] [--data-dir NAME=PATH --from VERSION]",
		Short: "Can this cluster move to VERSION? SAFE, or BLOCKED with every reason and the cheapest safe path",
		Long: `Checks an upgrade before it starts. Versions come from the live members (--endpoints), or
--from. Membership comes from each member's data dir (--data-dir NAME=PATH, members stopped),
or, online, from a copy of each member's db taken with the snapshot API (--fetch-backends: it
streams every member's whole db once, as etcdctl snapshot save would, into a temporary file
that is removed afterwards). Online without it, v3.5 shows only the v2 store, so drift cannot be
seen and the check says so.

Exit codes: 0 SAFE, 2 BLOCKED, 3 could not run.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			target, err := upgrade.ParseVersion(to)
			if err != nil || to == "" {
				return failf("e.g. --to v3.6.16", "--to: %v", err)
			}
			gather, err := gatherOptions(cmd, &cf, dataDirs, deployed, from)
			if err != nil {
				return err
			}
			gather.FetchBackends = fetch
			facts, err := upgrade.Gather(cmd.Context(), gather)
			if err != nil {
				return gatherFailed(err)
			}
			rep := upgrade.Check(facts.Current, target, facts.Members)
			p, _ := printerFor(opts.writeOut)
			if err := p.UpgradeCheck(cmd.OutOrStdout(), rep); err != nil {
				return err
			}
			if rep.Verdict != "SAFE" {
				return verdict{code: exitCritical}
			}
			return nil
		},
	}
	cf.register(cmd.Flags())
	cmd.Flags().StringVar(&to, "to", "", "the target version, e.g. v3.6.16")
	cmd.Flags().StringVar(&from, "from", "", "the version the members run (when not asking them)")
	cmd.Flags().StringArrayVar(&dataDirs, "data-dir", nil, "a stopped member's data dir as NAME=PATH (repeatable)")
	deployed.register(cmd.Flags())
	cmd.Flags().BoolVar(&fetch, "fetch-backends", false, "copy each member's db through its snapshot API to read its v3 membership (streams the whole db)")
	return cmd
}

// gatherOptions reads where upgrade check finds its facts: the live cluster (--endpoints or
// --discover-kubeadm), stopped members' data dirs, --from.
func gatherOptions(cmd *cobra.Command, cf *connFlags, dataDirs []string, deployed memberDeployments, from string) (upgrade.GatherOptions, error) {
	var o upgrade.GatherOptions
	var err error
	if o.DataDirs, err = parseOptionalDataDirs(dataDirs, deployed); err != nil {
		return o, err
	}
	if from != "" {
		if o.From, err = upgrade.ParseVersion(from); err != nil {
			return o, failf("", "--from: %v", err)
		}
	}
	if o.Online = online(cmd, cf); o.Online {
		if err := cf.resolve(cmd.Flags()); err != nil {
			return o, err
		}
		o.Conn = cf.conn
	}
	return o, nil
}

// online is true when the command was told how to reach the cluster.
func online(cmd *cobra.Command, cf *connFlags) bool {
	return cmd.Flags().Changed("endpoints") || cf.kubeadm != ""
}

// gatherFailed turns what stopped the gathering of facts into one line and a hint.
func gatherFailed(err error) error {
	switch {
	case errors.Is(err, upgrade.ErrNoMemberAnswered):
		return failf("check --endpoints and the certificates", "%v", err)
	case errors.Is(err, upgrade.ErrVersionUnknown):
		return failf("give --from v3.5.x for data dirs of stopped members, or --endpoints", "%v", err)
	case errors.Is(err, datadir.ErrLocked):
		return inspectError(err)
	}
	return err
}

// parseOptionalDataDirs reads --data-dir NAME=PATH, with --wal-dir NAME=PATH for a member whose
// WAL lives apart, or the member read from how it runs (--from-process, --from-config,
// --from-unit NAME=...).
func parseOptionalDataDirs(specs []string, deployed memberDeployments) ([]upgrade.DataDir, error) {
	var members []recovery.MemberInput
	for _, s := range specs {
		name, path, ok := strings.Cut(s, "=")
		if !ok || name == "" || path == "" {
			return nil, failf("", "--data-dir %q: want NAME=PATH", s)
		}
		members = append(members, recovery.MemberInput{Name: name, DataDir: path})
	}
	members, err := deployed.apply(members, map[string]string{})
	if err != nil {
		return nil, err
	}
	var out []upgrade.DataDir
	for _, m := range members {
		out = append(out, upgrade.DataDir{Name: m.Name, DataDir: m.DataDir, WALDir: m.WALDir})
	}
	return out, nil
}

func newUpgradePlanCommand(opts *globalOptions) *cobra.Command {
	var cf connFlags
	var to, backupDir, planDir string
	var dataDirs, binaries, etcdFlags, passEnv []string
	var deployed memberDeployments
	cmd := &cobra.Command{
		Use:   "plan --to VERSION --endpoints ... --data-dir NAME=PATH... --etcd-binary VERSION=PATH... --backup-dir DIR --plan-dir DIR",
		Short: "Write a rolling upgrade plan: the safe hops (through v3.5.24+ and a full restart when needed), member by member",
		Long: `Checks the upgrade (every member's db fetched) and writes the plan into --plan-dir, a folder
with no plan and no journal in it. Refused, nothing written, when the check holds a critical
finding the hops do not route around (v2 custom keys, auth on from v3.4, drift with no full
restart on v3.5.24+ in the path, ...): each is listed with its remedy.

Exit codes: 0 the plan is written, 2 refused by the check, 3 could not run.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			target, err := upgrade.ParseVersion(to)
			if err != nil || to == "" {
				return failf("e.g. --to v3.6.16", "--to: %v", err)
			}
			if planDir == "" {
				return failf("", "--plan-dir is required")
			}
			bins := map[string]string{}
			for _, b := range binaries {
				ver, path, ok := strings.Cut(b, "=")
				if !ok {
					return failf("", "--etcd-binary %q: want VERSION=PATH", b)
				}
				if _, err := upgrade.ParseVersion(ver); err != nil {
					return failf("", "--etcd-binary %q: %v", b, err)
				}
				bins[ver] = path
			}
			dirs, err := parseOptionalDataDirs(dataDirs, deployed)
			if err != nil {
				return err
			}
			passed, err := passedEnv(passEnv)
			if err != nil {
				return err
			}
			if !online(cmd, &cf) {
				return failf("", "upgrade plan needs the live cluster: --endpoints")
			}
			if err := cf.resolve(cmd.Flags()); err != nil {
				return err
			}
			// Before every member's db is fetched: a folder in use is refused (Save checks again).
			if err := plan.CheckUnused(planDir); err != nil {
				return planDirRefused(err)
			}
			p, err := upgrade.Prepare(cmd.Context(), upgrade.PrepareOptions{Conn: cf.conn, Target: target, DataDirs: dirs,
				Binaries: bins, BackupDir: backupDir, EtcdFlags: etcdFlags, PassEnv: passed, Now: time.Now()})
			var noDir *upgrade.NoDataDirError
			switch {
			case errors.As(err, &noDir):
				return failf("the upgrade restarts each member as a local process on its data dir", "%v", err)
			case errors.Is(err, upgrade.ErrBlocked):
				return &cliError{code: exitCritical, err: err, hint: "nothing was written: do what each finding says, then run etcdmedic upgrade check again"}
			case err != nil:
				return gatherFailed(err)
			}
			l, err := runlock.Acquire(planDir, "upgrade plan")
			if err != nil {
				return lockFailed(err)
			}
			defer l.Release()
			if err := p.Save(planDir); err != nil {
				return planDirRefused(err)
			}
			pr, _ := printerFor(opts.writeOut)
			return pr.UpgradePlan(cmd.OutOrStdout(), p)
		},
	}
	cf.register(cmd.Flags())
	cmd.Flags().StringVar(&to, "to", "", "the target version")
	cmd.Flags().StringArrayVar(&dataDirs, "data-dir", nil, "each member's data dir as NAME=PATH (the member is restarted on it)")
	deployed.register(cmd.Flags())
	cmd.Flags().StringArrayVar(&binaries, "etcd-binary", nil, "an etcd binary as VERSION=PATH, for the target and every intermediate version (repeatable)")
	cmd.Flags().StringVar(&backupDir, "backup-dir", "", "where the snapshot taken before the upgrade goes")
	cmd.Flags().StringVar(&planDir, "plan-dir", "", "where the plan and its journal go")
	cmd.Flags().StringArrayVar(&etcdFlags, "etcd-flag", nil, "an extra flag every member restarts with (repeatable)")
	cmd.Flags().StringArrayVar(&passEnv, "pass-env", nil, passEnvUsage+"; recorded in the plan (with its value) for apply")
	return cmd
}

func newUpgradeApplyCommand(opts *globalOptions) *cobra.Command {
	var cf connFlags
	var yes bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "apply PLAN_DIR --yes",
		Short: "Carry out (or resume) an upgrade plan, one member at a time, stopping on any regression",
		Long: `Carries out an upgrade plan made by upgrade plan, one step at a time, each recorded in the
plan's journal: run again after a failure or an interruption, it skips the steps done.

A member is stopped only when the cluster can spare it: every other member of the plan up and
serving, one leader, and a quorum of voters serving without it (a cluster of one or two voters
never has one: there it is enough that every other voter serves). Otherwise apply waits up to
30 s, then stops with nothing stopped and names the members that are down; run it again once
they are back. Before its first step it checks the plan's recorded check again, and refuses
(exit 2, nothing started or stopped) a plan whose check holds a critical finding its hops do
not route around.

Progress: with -w table, a line per step and per event on stderr, and the step timings on
stdout at the end. With -w json, stderr is JSON lines: one object per event as it happens
({"time","event","member","step","message"}; event is step-started, step-skipped,
step-finished, step-failed, snapshot-saved, leader-moved, member-restarted or
member-started-again), and stdout holds the result alone ({"planDir","report","error"}).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := upgrade.LoadPlan(args[0])
			if err != nil {
				return failf("", "%v", err)
			}
			pr, _ := printerFor(opts.writeOut)
			if !yes {
				pr.UpgradePlan(cmd.OutOrStdout(), p)
				return failf("read the plan above, then run again with --yes", "apply restarts every member: it needs --yes")
			}
			// One run at a time on the plan (its journal) and on every member's data dir.
			dirs := []string{args[0]}
			for _, m := range p.Members {
				dirs = append(dirs, m.DataDir)
			}
			release, err := runlock.AcquireAll(dirs, "upgrade apply")
			if err != nil {
				return lockFailed(err)
			}
			defer release()
			if err := cf.resolve(cmd.Flags()); err != nil {
				return err
			}
			progress := newProgress(opts.writeOut, cmd.ErrOrStderr())
			ap := &upgrade.Applier{Plan: p, Dir: args[0], Conn: cf.conn, Progress: upgradeProgress(progress), Timeout: timeout}
			applied, err := ap.Apply(cmd.Context())
			res := upgradeApplyResult{PlanDir: args[0], Report: applied}
			if err != nil {
				res.Error = err.Error()
			}
			if perr := pr.UpgradeApply(cmd.OutOrStdout(), res); perr != nil {
				return perr
			}
			if errors.Is(err, upgrade.ErrBlocked) {
				return &cliError{code: exitCritical, err: err, hint: "nothing was started or stopped: do what each finding says, run etcdmedic upgrade check again, then make a new plan in a new --plan-dir"}
			}
			if err != nil {
				return failf(fmt.Sprintf("fix the cause, then run etcdmedic upgrade apply %s --yes again: done steps are skipped", args[0]), "%v", err)
			}
			return nil
		},
	}
	cf.register(cmd.Flags())
	cmd.Flags().BoolVar(&yes, "yes", false, "really restart the members")
	cmd.Flags().DurationVar(&timeout, "step-timeout", 2*time.Minute, "how long a restarted member may take to serve and catch up")
	return cmd
}

// planDirRefused says why the plan could not be written into --plan-dir.
func planDirRefused(err error) error {
	if errors.Is(err, plan.ErrFolderUsed) {
		return failf("give a new --plan-dir (and never delete a plan's journal: it records what was done)", "%v", err)
	}
	return failf("", "%v", err)
}

// upgradeApplyResult is what upgrade apply prints at its end.
type upgradeApplyResult struct {
	PlanDir string           `json:"planDir"`
	Report  *upgrade.Applied `json:"report"`
	// Error is why this run stopped ("": it finished); running apply again resumes there.
	Error string `json:"error,omitempty"`
}

// upgradeProgress shows apply's events: each step as a heading, what happens in it under
// it; a step's end and failure for programs only (the timings and the error line say them).
func upgradeProgress(p *progress) func(upgrade.Event) {
	return func(e upgrade.Event) {
		line := detailLine
		switch e.Kind {
		case upgrade.StepStarted, upgrade.StepSkipped:
			line = headingLine
		case upgrade.StepFinished, upgrade.StepFailed:
			line = noLine
		}
		p.event(progressEvent{Event: string(e.Kind), Member: e.Member, Step: e.Step, Message: e.Message, line: line})
	}
}
