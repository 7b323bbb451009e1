package main

import (
	"cmp"
	"errors"
	"time"

	"github.com/spf13/cobra"

	"github.com/etcdmedic/etcdmedic/member"
	"github.com/etcdmedic/etcdmedic/runlock"
	"github.com/etcdmedic/etcdmedic/runtime/local"
)

// memberOptions are shared by the member subcommands.
type memberOptions struct {
	connFlags
	spec      member.JoinSpec
	start     bool
	etcdCmd   string
	passEnv   []string
	backupDir string
	dryRun    bool
	catchUp   time.Duration
	from      deploymentFlags // the new member read from how it will run
}

func newMemberCommand(opts *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "member",
		Short: "Membership changes with guards: replace, add (as a learner), promote, remove",
	}
	cmd.AddCommand(newMemberReplaceCommand(opts), newMemberAddCommand(opts), newMemberPromoteCommand(opts), newMemberRemoveCommand(opts))
	return cmd
}

func (o *memberOptions) registerJoin(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&o.spec.Name, "name", "", "the new member's name")
	f.StringSliceVar(&o.spec.PeerURLs, "peer-urls", nil, "the new member's peer URLs")
	f.StringSliceVar(&o.spec.ClientURLs, "client-urls", nil, "the new member's client URLs (to start it)")
	f.StringVar(&o.spec.DataDir, "data-dir", "", "the new member's data dir (guarded: any data in it is quarantined)")
	f.StringVar(&o.spec.WALDir, "wal-dir", "", "the new member's --wal-dir, when its WAL lives apart (guarded with the data dir, passed to etcd)")
	f.BoolVar(&o.start, "start", false, "start the new member as a local process (else the steps to start it are printed)")
	f.StringVar(&o.etcdCmd, "etcd-command", "", "with --start: how to run etcd (default: the etcd linked into etcdmedic)")
	f.StringArrayVar(&o.spec.ExtraFlags, "etcd-flag", nil, "with --start: an extra etcd flag (repeatable)")
	f.StringArrayVar(&o.passEnv, "pass-env", nil, "with --start: "+passEnvUsage)
	f.DurationVar(&o.catchUp, "catch-up-timeout", 2*time.Minute, "how long the new member may take to catch up before promotion")
	o.from.registerFrom(f)
}

func (o *memberOptions) joiner(cmd *cobra.Command) (*member.Joiner, func(), error) {
	if err := o.resolve(cmd.Flags()); err != nil {
		return nil, nil, err
	}
	env, err := passedEnv(o.passEnv) // said before anything is asked of the cluster
	if err != nil {
		return nil, nil, err
	}
	cli, err := o.conn.Client()
	if err != nil {
		return nil, nil, failf("", "connect to the cluster: %v", err)
	}
	j := &member.Joiner{Client: cli, Out: progressOf(cmd), CatchUp: o.catchUp}
	if o.start {
		if o.spec.DataDir == "" || len(o.spec.ClientURLs) == 0 {
			cli.Close()
			return nil, nil, failf("", "--start needs --data-dir and --client-urls")
		}
		command, err := etcdCommand(o.etcdCmd)
		if err != nil {
			cli.Close()
			return nil, nil, err
		}
		j.Runtime = local.Runtime{Command: command, Env: env}
	}
	return j, func() { cli.Close() }, nil
}

func (o *memberOptions) needJoinSpec() error {
	// The new member as its config file, unit or process says it will run: what the flags
	// leave out is taken from there; what they give must agree on the data dir.
	dataDir, walDir, spec, err := (deploymentFlags{walDir: o.spec.WALDir, fromProcess: o.from.fromProcess, fromConfig: o.from.fromConfig, fromUnit: o.from.fromUnit}).dataDirFrom(o.spec.DataDir)
	if err != nil && (o.from.fromProcess != 0 || o.from.fromConfig != "" || o.from.fromUnit != "") {
		return failf("", "%v", err)
	}
	if spec != nil {
		o.spec.DataDir, o.spec.WALDir = dataDir, walDir
		o.spec.Name = cmp.Or(o.spec.Name, spec.Name)
		if len(o.spec.PeerURLs) == 0 {
			o.spec.PeerURLs = spec.PeerURLs
		}
		if len(o.spec.ClientURLs) == 0 {
			o.spec.ClientURLs = spec.ClientURLs
		}
	}
	if o.spec.Name == "" || len(o.spec.PeerURLs) == 0 {
		return failf("e.g. --name m4 --peer-urls http://10.0.0.4:2380", "--name and --peer-urls are required")
	}
	return nil
}

func refusedOrFailed(err error) error {
	if errors.Is(err, member.ErrRefused) {
		return &cliError{code: exitCritical, err: err, hint: "nothing was changed"}
	}
	return failf("run the same command again: finished steps are recognized and skipped", "%v", err)
}

func newMemberReplaceCommand(opts *globalOptions) *cobra.Command {
	o := &memberOptions{}
	cmd := &cobra.Command{
		Use:   "replace OLD --name NEW --peer-urls URLS [--client-urls URLS --data-dir DIR --start] --backup-dir DIR",
		Short: "Replace a failed member: snapshot, remove it, add the new one as a learner, start, promote, verify",
		Long: `Replaces the member OLD (a name or hex ID) the safe way. Refused, changing nothing, when the
cluster has no quorum, when another learner is pending, when removing OLD would leave fewer
voters up than a quorum, when OLD is not a member (unless an earlier run of this replace removed
it: NEW is already added, or that run's record in --backup-dir says so), or when NEW's peer URLs
belong to another member. Otherwise, printing each step before it runs: a sha256-checksummed
snapshot of the cluster into --backup-dir (read back to verify), a record of the replacement
there, member remove OLD, guard the new data dir (any data in it is quarantined, never deleted),
member add NEW as a learner, start it (--start: a local process; otherwise the exact flags are
printed), wait until it has caught up, promote it, and verify with doctor. --dry-run prints the
plan only. Run again after an interruption, with the same --backup-dir: finished steps are
recognized; a learner an earlier run started on --data-dir (that data dir holds its member ID)
is kept as it is, started again only if it is not running, and promoted.

Exit codes: 0 replaced, 2 refused (nothing changed), 3 failed part way (run again).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.needJoinSpec(); err != nil {
				return err
			}
			if o.backupDir == "" && !o.dryRun {
				return failf("a snapshot is taken before anything changes: say where, e.g. --backup-dir /var/backups/etcd", "--backup-dir is required")
			}
			j, closeFn, err := o.joiner(cmd)
			if err != nil {
				return err
			}
			defer closeFn()
			if o.spec.DataDir != "" && !o.dryRun { // its contents may be quarantined, then a member starts on it
				l, err := runlock.Acquire(o.spec.DataDir, "member replace")
				if err != nil {
					return lockFailed(err)
				}
				defer l.Release()
			}
			r := &member.Replacer{Conn: o.conn, Client: j.Client, Joiner: j, Out: progressOf(cmd), BackupDir: o.backupDir, DryRun: o.dryRun}
			res, err := r.Replace(cmd.Context(), args[0], o.spec)
			if res != nil {
				p, _ := printerFor(opts.writeOut)
				if perr := p.MemberChange(cmd.OutOrStdout(), res); perr != nil {
					return perr
				}
			}
			if err != nil {
				return refusedOrFailed(err)
			}
			return nil
		},
	}
	o.register(cmd.Flags())
	o.registerJoin(cmd)
	cmd.Flags().StringVar(&o.backupDir, "backup-dir", "", "where the snapshot taken before the change goes")
	cmd.Flags().BoolVar(&o.dryRun, "dry-run", false, "print the plan and change nothing")
	return cmd
}

func newMemberAddCommand(opts *globalOptions) *cobra.Command {
	o := &memberOptions{}
	cmd := &cobra.Command{
		Use:   "add --name NAME --peer-urls URLS [--client-urls URLS --data-dir DIR --start]",
		Short: "Add a member as a learner (refused without quorum or while another learner is pending); with --start, start and promote it",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.needJoinSpec(); err != nil {
				return err
			}
			j, closeFn, err := o.joiner(cmd)
			if err != nil {
				return err
			}
			defer closeFn()
			if o.spec.DataDir != "" {
				l, err := runlock.Acquire(o.spec.DataDir, "member add")
				if err != nil {
					return lockFailed(err)
				}
				defer l.Release()
			}
			res, err := member.Add(cmd.Context(), member.AddOptions{Conn: o.conn, Joiner: j, Spec: o.spec, Out: progressOf(cmd)})
			if res != nil {
				p, _ := printerFor(opts.writeOut)
				p.MemberChange(cmd.OutOrStdout(), res)
			}
			if err != nil {
				return refusedOrFailed(err)
			}
			return nil
		},
	}
	o.register(cmd.Flags())
	o.registerJoin(cmd)
	return cmd
}

func newMemberPromoteCommand(opts *globalOptions) *cobra.Command {
	o := &memberOptions{}
	cmd := &cobra.Command{
		Use:   "promote NAME|ID",
		Short: "Promote a learner once it has caught up (waits, writing a harmless key so it cannot stall)",
		Long: `Promotes the learner NAME (or hex ID) once etcd accepts it: etcd refuses a promotion until the
learner has caught up, so it retries, writing a harmless key meanwhile (a learner on an idle
cluster can stall forever), for up to --catch-up-timeout.

Exit codes: 0 promoted, 2 refused (no such learner; nothing changed), 3 failed (run again).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.resolve(cmd.Flags()); err != nil {
				return err
			}
			res, err := member.Promote(cmd.Context(), member.PromoteOptions{Conn: o.conn, Learner: args[0], CatchUp: o.catchUp})
			if err != nil {
				return refusedOrFailed(err)
			}
			p, _ := printerFor(opts.writeOut)
			return p.MemberPromote(cmd.OutOrStdout(), res)
		},
	}
	o.register(cmd.Flags())
	cmd.Flags().DurationVar(&o.catchUp, "catch-up-timeout", 2*time.Minute, "how long to wait for the learner to catch up")
	return cmd
}

func newMemberRemoveCommand(opts *globalOptions) *cobra.Command {
	o := &memberOptions{}
	cmd := &cobra.Command{
		Use:   "remove NAME|ID",
		Short: "Remove a member, refused when it would leave fewer voters up than a quorum",
		Long: `Removes the member NAME (or hex ID). Refused, changing nothing, when no member answers, the
cluster has no quorum, or the removal would leave fewer voters up than a quorum. The member's
data dir is left as it was: quarantine it (etcdmedic guard --fix) before its volume is reused.

Exit codes: 0 removed (or, with --dry-run, would be), 2 refused (nothing changed), 3 failed.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.resolve(cmd.Flags()); err != nil {
				return err
			}
			res, err := member.RemoveSafely(cmd.Context(), member.RemoveOptions{Conn: o.conn, Member: args[0], DryRun: o.dryRun})
			if err != nil {
				return refusedOrFailed(err)
			}
			p, _ := printerFor(opts.writeOut)
			return p.MemberRemove(cmd.OutOrStdout(), res)
		},
	}
	o.register(cmd.Flags())
	cmd.Flags().BoolVar(&o.dryRun, "dry-run", false, "check and print, change nothing")
	return cmd
}
