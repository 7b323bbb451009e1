package main

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/etcdmedic/etcdmedic/cluster"
	"github.com/etcdmedic/etcdmedic/plan"
	"github.com/etcdmedic/etcdmedic/recovery"
	"github.com/etcdmedic/etcdmedic/runlock"
	"github.com/etcdmedic/etcdmedic/runtime/local"
	"github.com/etcdmedic/etcdmedic/runtime/runbook"
)

// recoverPlanResult is what `recover plan` prints.
type recoverPlanResult struct {
	PlanDir string         `json:"planDir"`
	Plan    *recovery.Plan `json:"plan"`
}

// recoverApplyResult is what `recover apply` prints.
type recoverApplyResult struct {
	PlanDir string           `json:"planDir"`
	Report  *recovery.Report `json:"report"`
}

func newRecoverCommand(opts *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "recover",
		Short: "Rebuild a cluster that lost quorum from its best member, losing nothing it had (plan, then apply)",
		Long: `Incident 2's repair, planned and journaled:

  etcdmedic recover plan --data-dir m1=/var/lib/etcd ... --backup-dir /backups --plan-dir /root/recovery
  etcdmedic recover apply /root/recovery --yes

plan proves quorum lost (failing closed: a member counts as down only when its client and
peer URLs refuse connections and nothing here holds its data dir; --down NAME for a node known
to be off), stops any member still running on its data dir (its process, --kubeadm-manifest,
--systemd-unit) and watches that it stays stopped, reads every data dir offline, and chooses
the survivor by Raft's rule: the most up-to-date log (last term, then last index), read whole
(every WAL record, every db page) before it is taken. It shows every candidate side by side
with its standing in the survivor's membership and what choosing the survivor costs it.
--survivor overrides, with a warning that states the loss. A removed member is left alone
unless --readd; unreadable data is never moved without --discard-unreadable.

apply proves again that quorum is lost before every destructive step, backs up every data dir
(checksummed, verified), commits the survivor's whole log and, while it is stopped, appends to
its WAL the removals of the other members that --force-new-cluster would make, starts it once
without any flag, removes any leftover member, then re-adds
each other member as a learner on a quarantined (never deleted) data dir, promotes it once
caught up, and verifies: every member up, a leader, equal hashes, no revision lost. Every step
is journaled beside the plan: run apply again after an interruption and it resumes.`,
	}
	cmd.AddCommand(newRecoverPlanCommand(opts), newRecoverApplyCommand(opts))
	return cmd
}

func newRecoverPlanCommand(opts *globalOptions) *cobra.Command {
	var cf connFlags
	var dataDirs []string
	var backupDir, planDir, survivor, etcdCmd string
	var etcdFlags, passEnv, manifests, runbooks, kubeadmJoins, units, readds, discards, downs []string
	var snap recovery.SnapshotOptions
	var fromBackup storeFlags
	var backupID string
	var deployed memberDeployments
	cmd := &cobra.Command{
		Use:   "plan --data-dir NAME=PATH... --backup-dir DIR --plan-dir DIR",
		Short: "Assess a cluster without quorum (stopping members still running on their data dirs), choose the survivor, and write the recovery plan (changes no data)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			members, err := parseDataDirs(dataDirs, len(deployed.processes)+len(deployed.configs)+len(deployed.units) > 0)
			if err != nil {
				return err
			}
			if planDir == "" {
				return failf("", "--plan-dir is required: the plan and its journal are kept there")
			}
			// Before any member is probed or stopped: apply will run what this folder holds, and
			// a folder with a plan or a journal already is another recovery's.
			if err := plan.CheckUnused(planDir); err != nil {
				return failf("", "--plan-dir: %v", err)
			}
			if err := cf.resolve(cmd.Flags()); err != nil && cmd.Flags().Changed("endpoints") {
				return err
			}
			// The options are read first: a mistyped flag is said before any member is probed.
			var command []string
			if etcdCmd != "" {
				command = strings.Fields(etcdCmd)
			}
			byName, err := parsePairs("--kubeadm-manifest", "NAME=PATH", manifests)
			if err != nil {
				return err
			}
			unitByName, err := parsePairs("--systemd-unit", "NAME=UNIT", units)
			if err != nil {
				return err
			}
			if members, err = deployed.apply(members, unitByName); err != nil {
				return err
			}
			passed, err := passedEnv(passEnv)
			if err != nil {
				return err
			}
			po := recovery.PlanOptions{BackupDir: backupDir, EtcdCommand: command, EtcdFlags: etcdFlags, PassEnv: passed, Manifests: byName,
				Runbook: map[string]runbook.Style{}, KubeadmJoin: map[string]bool{}, SystemdUnits: unitByName,
				ReAdd: setOf(readds), DiscardUnreadable: setOf(discards), Conn: cf.conn, Down: setOf(downs)}
			for _, rb := range runbooks {
				name, style, _ := strings.Cut(rb, "=")
				if style == "" {
					style = string(runbook.Process)
				}
				if name == "" || (style != string(runbook.Process) && style != string(runbook.Kubeadm)) {
					return failf("", "--runbook %q: want NAME or NAME=process|kubeadm", rb)
				}
				po.Runbook[name] = runbook.Style(style)
			}
			for _, name := range kubeadmJoins {
				po.KubeadmJoin[name] = true
			}
			if fromBackup.url != "" {
				if snap.Path != "" {
					return failf("", "--from-backup and --from-snapshot: give one")
				}
				if planDir == "" {
					return failf("", "--plan-dir is required")
				}
				if snap.Path, err = fetchBackup(cmd, &fromBackup, backupID, planDir); err != nil {
					return err
				}
			}
			if snap.Path != "" {
				po.Snapshot = &snap
			} else if snap.BumpRevision > 0 || snap.MarkCompacted || snap.Etcdutl != "" {
				return failf("", "--bump-revision, --mark-compacted and --etcdutl go with --from-snapshot FILE or --from-backup STORE")
			}
			conn := cf.conn
			if !cmd.Flags().Changed("endpoints") && cf.kubeadm == "" {
				conn.Endpoints = nil // the members' own client URLs are probed
			}
			p, a, err := recovery.MakePlan(cmd.Context(), recovery.MakePlanOptions{PlanDir: planDir, Members: members, Plan: po,
				Assess: recovery.AssessOptions{Conn: conn, Survivor: survivor, Stopper: recovery.Stopper(po, local.Runtime{}), Down: po.Down,
					FromSnapshot: po.Snapshot != nil, BackupDir: po.BackupDir, Manifests: po.Manifests}})
			var notLocked recovery.LockError
			switch {
			case errors.Is(err, recovery.ErrNotNeeded) || errors.Is(err, recovery.ErrCannotTell):
				return &cliError{code: exitCritical, err: err, hint: "nothing was changed"}
			case errors.As(err, &notLocked):
				return lockFailed(notLocked.Err)
			case errors.Is(err, recovery.ErrBadInput) && stoppedByPlan(a) == "":
				return failf("nothing was stopped or written", "%v", err)
			case err != nil:
				return failf(stoppedByPlan(a), "%v", err)
			}
			pr, _ := printerFor(opts.writeOut)
			return pr.RecoverPlan(cmd.OutOrStdout(), recoverPlanResult{PlanDir: planDir, Plan: p})
		},
	}
	cf.register(cmd.Flags())
	deployed.register(cmd.Flags())
	cmd.Flags().StringArrayVar(&dataDirs, "data-dir", nil, "a member's data dir as NAME=PATH (repeat for every member, the wiped ones too)")
	cmd.Flags().StringVar(&backupDir, "backup-dir", "", "where apply copies every data dir before changing anything")
	cmd.Flags().StringVar(&planDir, "plan-dir", "", "where the plan (plan.json) and its journal go")
	cmd.Flags().StringVar(&survivor, "survivor", "", "rebuild from this member instead of the best one (its loss is stated)")
	cmd.Flags().StringVar(&etcdCmd, "etcd-command", "", "how apply runs etcd, e.g. \"/usr/local/bin/etcd\" (default: the etcd linked into etcdmedic)")
	cmd.Flags().StringArrayVar(&etcdFlags, "etcd-flag", nil, "an extra flag every member starts with (repeatable), e.g. TLS files")
	cmd.Flags().StringArrayVar(&passEnv, "pass-env", nil, passEnvUsage+"; recorded in the plan (with its value) for apply")
	cmd.Flags().StringVar(&snap.Path, "from-snapshot", "", "rebuild the survivor from this snapshot file (etcdctl snapshot save) instead of from its own data; the loss is stated")
	cmd.Flags().StringVar(&fromBackup.url, "from-backup", "", "rebuild from a backup in this store (etcdmedic backup now): it is downloaded and checked, then used as --from-snapshot")
	cmd.Flags().StringVar(&backupID, "backup-id", "latest", "with --from-backup: which backup (etcdmedic backup ls)")
	cmd.Flags().StringVar(&fromBackup.identityFile, "age-identity", "", "with --from-backup: the age identity file that opens encrypted backups")
	cmd.Flags().StringVar(&snap.Etcdutl, "etcdutl", "", "with --from-snapshot: the etcdutl of the cluster's etcd version (default: etcdutl in PATH)")
	cmd.Flags().Uint64Var(&snap.BumpRevision, "bump-revision", 0, "with --from-snapshot: add this to every revision (Kubernetes: more than the writes since the snapshot, e.g. 1000000000), so that watchers never see revisions go back")
	cmd.Flags().BoolVar(&snap.MarkCompacted, "mark-compacted", false, "with --from-snapshot and --bump-revision: mark the restored revisions compacted, so that watchers and informers relist instead of resuming")
	cmd.Flags().StringArrayVar(&runbooks, "runbook", nil, "a member on a node etcdmedic cannot act on, as NAME or NAME=process|kubeadm (repeatable): apply prints its commands and waits for you to confirm each checkpoint")
	cmd.Flags().StringArrayVar(&kubeadmJoins, "kubeadm-join", nil, "a member whose node was reset with kubeadm (repeatable): it rejoins with kubeadm join --control-plane, printed for you to run")
	cmd.Flags().StringArrayVar(&units, "systemd-unit", nil, "a member run by a systemd unit as NAME=UNIT (repeatable): stopped with systemctl stop before anything is read or changed; the recovery then runs it as a local process")
	cmd.Flags().StringArrayVar(&readds, "readd", nil, "a member whose data dir is given but who is no longer in the survivor's membership (removed): add it back anyway (repeatable; default: left alone)")
	cmd.Flags().StringArrayVar(&downs, "down", nil, "a member you know to be down for good (its node powered off or fenced), repeatable: a member that does not answer at all cannot be proven down otherwise; recorded in the plan, and it still counts as up if it answers")
	cmd.Flags().StringArrayVar(&discards, "discard-unreadable", nil, "a member whose data dir cannot be read: move it aside anyway, accepting that anything only it had is lost to the cluster (kept in quarantine; repeatable)")
	cmd.Flags().StringArrayVar(&manifests, "kubeadm-manifest", nil, "a member run by kubelet as NAME=PATH of its static pod manifest (repeatable): stopped and started by moving and editing it")
	return cmd
}

// stoppedByPlan says which members plan stopped before it refused, so that an operator who
// abandons the recovery knows what to start again ("" when it stopped none).
func stoppedByPlan(a *recovery.Assessment) string {
	if a == nil {
		return ""
	}
	var stopped []string
	for _, c := range a.Candidates {
		if c.StoppedByPlan != "" {
			stopped = append(stopped, c.Name+" ("+c.StoppedByPlan+")")
		}
	}
	if len(stopped) == 0 {
		return ""
	}
	return "plan stopped " + strings.Join(stopped, ", ") + ": start them again as they were run if you abandon the recovery"
}

// parsePairs reads repeated NAME=VALUE flags.
func parsePairs(flag, want string, specs []string) (map[string]string, error) {
	out := map[string]string{}
	for _, s := range specs {
		name, value, ok := strings.Cut(s, "=")
		if !ok || name == "" || value == "" {
			return nil, failf("", "%s %q: want %s", flag, s, want)
		}
		out[name] = value
	}
	return out, nil
}

func setOf(names []string) map[string]bool {
	out := map[string]bool{}
	for _, n := range names {
		out[n] = true
	}
	return out
}

func parseDataDirs(specs []string, deployed bool) ([]recovery.MemberInput, error) {
	if len(specs) == 0 && !deployed {
		return nil, failf("e.g. --data-dir m1=/var/lib/etcd-m1 --data-dir m2=/mnt/m2/etcd ...", "give every member's data dir with --data-dir NAME=PATH")
	}
	seen := map[string]bool{}
	var out []recovery.MemberInput
	for _, s := range specs {
		name, path, ok := strings.Cut(s, "=")
		if !ok || name == "" || path == "" {
			return nil, failf("", "--data-dir %q: want NAME=PATH", s)
		}
		if seen[name] {
			return nil, failf("", "--data-dir: member %s given twice", name)
		}
		seen[name] = true
		out = append(out, recovery.MemberInput{Name: name, DataDir: path})
	}
	return out, nil
}

func newRecoverApplyCommand(opts *globalOptions) *cobra.Command {
	var yes bool
	var timeout time.Duration
	var cf connFlags
	cmd := &cobra.Command{
		Use:   "apply PLAN_DIR --yes",
		Short: "Carry out (or resume) a recovery plan",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := recovery.LoadPlan(args[0])
			if err != nil {
				return failf("", "%v", err)
			}
			if !yes {
				pr, _ := printerFor(opts.writeOut)
				pr.RecoverPlan(cmd.OutOrStdout(), recoverPlanResult{PlanDir: args[0], Plan: p})
				return failf("read the plan above, then run again with --yes", "apply changes the cluster: it needs --yes")
			}
			command := p.EtcdCommand
			if len(command) == 0 {
				if command, err = linkedEtcdCommandLine(); err != nil {
					return err
				}
			}
			if err := cf.resolve(cmd.Flags()); err != nil {
				return err
			}
			if p.Connection.InsecureSkipVerify && !cf.conn.InsecureSkipVerify {
				warnTLSOff(cmd.ErrOrStderr(), "recorded in the plan")
			}
			// The plan's timeouts hold unless given again here.
			for _, t := range []struct {
				flag string
				d    *time.Duration
			}{{"dial-timeout", &cf.conn.DialTimeout}, {"command-timeout", &cf.conn.CommandTimeout}} {
				if !cmd.Flags().Changed(t.flag) && os.Getenv(cluster.EnvVar(t.flag)) == "" {
					*t.d = 0
				}
			}
			ap := &recovery.Applier{Plan: p, Dir: args[0], Runtime: local.Runtime{Command: command, Env: p.PassEnv}, Out: newProgress(opts.writeOut, cmd.ErrOrStderr()).lines("recover-apply"), Conn: cf.conn, Timeout: timeout,
				Operator: runbook.NewOperator(cmd.InOrStdin(), cmd.ErrOrStderr())}
			rep, err := ap.Apply(cmd.Context())
			if rep != nil {
				pr, _ := printerFor(opts.writeOut)
				if perr := pr.RecoverApply(cmd.OutOrStdout(), recoverApplyResult{PlanDir: args[0], Report: rep}); perr != nil {
					return perr
				}
			}
			var held *runlock.HeldError
			if errors.As(err, &held) {
				return lockFailed(err)
			}
			if errors.Is(err, recovery.ErrStale) {
				hint := "nothing was changed"
				if rep != nil && len(rep.Timings) > 0 {
					hint = fmt.Sprintf("the steps above ran; the step that found this changed nothing (journal: %s/journal.jsonl)", args[0])
				}
				return &cliError{code: exitCritical, err: err, hint: hint}
			}
			if err != nil {
				return failf(fmt.Sprintf("run etcdmedic recover apply %s --yes again: done steps are skipped (journal: %s/journal.jsonl)", args[0], args[0]), "%v", err)
			}
			return nil
		},
	}
	cf.register(cmd.Flags())
	cmd.Flags().BoolVar(&yes, "yes", false, "really change the cluster")
	cmd.Flags().DurationVar(&timeout, "step-timeout", 2*time.Minute, "how long a member may take to serve, catch up, or verify")
	return cmd
}
