package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/etcdmedic/etcdmedic/datadir"
	"github.com/etcdmedic/etcdmedic/guard"
	"github.com/etcdmedic/etcdmedic/member"
	"github.com/etcdmedic/etcdmedic/runlock"
	"github.com/etcdmedic/etcdmedic/runtime/local"
)

// guardResult is the JSON of `etcdmedic guard`: guard's result, and the member added back
// (--rejoin).
type guardResult struct {
	guard.Result
	Joined *member.Joined `json:"joined,omitempty"`
}

type guardOptions struct {
	connFlags
	dataDir    string
	name       string
	peerURLs   []string
	clientURLs []string
	// clusterState is the member's --initial-cluster-state ("": not known).
	clusterState string
	fix          bool
	rejoin       bool
	start        bool
	etcdFlags    []string
	passEnv      []string // --pass-env names
	startEnv     []string // their NAME=value, read before anything changes
	etcdCmd      string
	from         deploymentFlags
	walDir       string // settled from --wal-dir or the deployment
	// memberFlags name the member as given (the --from-* form), for the commands guard prints.
	memberFlags []string
}

func newGuardCommand(opts *globalOptions) *cobra.Command {
	o := &guardOptions{}
	cmd := &cobra.Command{
		Use:   "guard --data-dir DIR --name NAME --peer-urls URLS --endpoints ...",
		Short: "Before a member starts: does its data dir belong to the live cluster? Quarantine it if not",
		Long: `Meant to run just before a member starts (an init container, ExecStartPre=, or by hand). It
inspects the data dir offline, probes the live cluster, and classifies the data dir:

  EMPTY       nothing there: a new member may join (after member add)
  VALID       same cluster, this member is live with these peer URLs
  FOREIGN     another cluster's data (or an older incarnation of this one), or not etcd data;
              only once the endpoints are proven to be this member's cluster (their membership
              holds its --peer-urls, or its --name): else UNKNOWN, nothing moved
  REMOVED     same cluster, but this member was removed
  MISMATCHED  the member is live, but its name or peer URLs are another member's
  UNKNOWN     the live cluster cannot be reached or has no quorum: etcdmedic never guesses
  UNREADABLE  etcdmedic cannot read the data dir as the user it runs as: nothing judged or moved
  INCOMPLETE  half a member: its db without its WAL, or its WAL (--wal-dir) without its db

A member whose WAL lives apart is given with --wal-dir; both halves are judged together and,
with --fix, quarantined together (each beside its own folder, one manifest). Instead of
--data-dir, --name and --peer-urls, the member can be read from how it runs: --from-process PID,
--from-config FILE or --from-unit NAME.

With --fix, a data dir that is not EMPTY or VALID is quarantined: its contents (a PD join file
included) move aside on the same filesystem, with a checksum manifest and the inspect report,
never deleted. With --rejoin the member is then added back as a learner; with --start it is also
started (as a local process), and promoted once caught up.

Exit codes: 0 safe to start; 2 not safe: do not start the member, and do what the NEXT lines
say (--fix where there is something to move aside; for an EMPTY data dir whose member is not
added yet, member add first: an init container waits, as etcd would otherwise bootstrap a
cluster of its own; for one whose member ran before, member replace); 3 UNKNOWN, UNREADABLE or
could not run.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			dataDir, walDir, spec, err := o.from.dataDirFrom(o.dataDir)
			if err != nil {
				return failf("give the member's data dir: --data-dir /var/lib/etcd (or --from-process, --from-config, --from-unit)", "%v", err)
			}
			o.dataDir, o.walDir = dataDir, walDir
			o.memberFlags = o.from.givenMember(cmd.Flags())
			if spec != nil {
				o.name = cmp.Or(o.name, spec.Name)
				if len(o.peerURLs) == 0 {
					o.peerURLs = spec.PeerURLs
				}
				if len(o.clientURLs) == 0 {
					o.clientURLs = spec.ClientURLs
				}
				o.clusterState = cmp.Or(o.clusterState, spec.InitialClusterState)
			}
			if o.clusterState != "" && o.clusterState != "new" && o.clusterState != "existing" {
				return failf("--initial-cluster-state new (it bootstraps a cluster) or existing (it joins one)", "--initial-cluster-state %q: want new or existing", o.clusterState)
			}
			if o.walDir != "" {
				o.etcdFlags = append(o.etcdFlags, "--wal-dir="+o.walDir) // a member started by --start
			}
			if (o.rejoin || o.start) && (o.name == "" || len(o.peerURLs) == 0) {
				return failf("the member joins as --name with --peer-urls (and --client-urls to start it)", "--rejoin needs --name and --peer-urls")
			}
			if o.start && (!o.rejoin || len(o.clientURLs) == 0) {
				return failf("", "--start goes with --rejoin and --client-urls")
			}
			if o.startEnv, err = passedEnv(o.passEnv); err != nil {
				return err
			}
			if err := o.resolve(cmd.Flags()); err != nil {
				return err
			}
			res, err := o.run(cmd.Context(), progressOf(cmd))
			p, _ := printerFor(opts.writeOut)
			if res != nil { // also when a later step failed: say what was done (quarantined, added)
				if perr := p.Guard(cmd.OutOrStdout(), *res); perr != nil {
					return perr
				}
			}
			if err != nil {
				return guardFailed(err, o.dataDir)
			}
			switch {
			case res.Verdict.Class == guard.Unknown, res.Verdict.Class == guard.Unreadable:
				return verdict{code: exitFailed}
			case res.Joined != nil:
				return nil
			case res.Quarantined != nil && len(res.Next) == 0:
				return nil // emptied, and the member is already in the membership
			case !res.Verdict.Safe || res.Quarantined != nil:
				return verdict{code: exitCritical}
			}
			return nil
		},
	}
	f := cmd.Flags()
	o.register(f)
	o.from.register(f)
	f.StringVar(&o.dataDir, "data-dir", "", "the member's data dir (etcd --data-dir, or PD's data dir)")
	f.StringVar(&o.name, "name", "", "the name the member will start with")
	f.StringSliceVar(&o.peerURLs, "peer-urls", nil, "the peer URLs the member will advertise")
	f.StringSliceVar(&o.clientURLs, "client-urls", nil, "with --start: the client URLs the member will serve")
	f.StringVar(&o.clusterState, "initial-cluster-state", "", "the member's --initial-cluster-state: new (on an empty data dir it bootstraps a cluster, so no member answering is expected) or existing (read from --from-* when not given)")
	f.BoolVar(&o.fix, "fix", false, "quarantine a data dir that is not safe to start on (moved aside, never deleted)")
	f.BoolVar(&o.rejoin, "rejoin", false, "after --fix (or on an empty dir), add the member back as a learner")
	f.BoolVar(&o.start, "start", false, "with --rejoin: also start it as a local process of the linked etcd, wait until it caught up, and promote it")
	f.StringVar(&o.etcdCmd, "etcd-command", "", "with --start: how to run etcd, e.g. \"/usr/local/bin/etcd\" (default: the etcd linked into etcdmedic)")
	f.StringArrayVar(&o.etcdFlags, "etcd-flag", nil, "with --start: an extra etcd flag (repeatable), e.g. --etcd-flag=--snapshot-count=10000")
	f.StringArrayVar(&o.passEnv, "pass-env", nil, "with --start: "+passEnvUsage)
	return cmd
}

// run calls guard.Run with the member the flags describe; with --rejoin, guard adds it back
// through member.Joiner, and with --start the linked etcd (or --etcd-command) runs it as a
// local process: that is process plumbing, so it is settled here, before anything changes.
func (o *guardOptions) run(ctx context.Context, progress io.Writer) (*guardResult, error) {
	opts := guard.Options{Conn: o.conn, DataDir: o.dataDir, WALDir: o.walDir, Expect: guard.Expect{Name: o.name, PeerURLs: o.peerURLs, Bootstraps: o.clusterState == "new"}, Fix: o.fix, Progress: progress, MemberFlags: o.memberFlags}
	var joined *member.Joined
	if o.rejoin {
		j := &member.Joiner{Out: progress}
		if o.start {
			command, err := etcdCommand(o.etcdCmd)
			if err != nil {
				return nil, err
			}
			j.Runtime = local.Runtime{Command: command, Env: o.startEnv}
		}
		spec := member.JoinSpec{Name: o.name, PeerURLs: o.peerURLs, ClientURLs: o.clientURLs, DataDir: o.dataDir, ExtraFlags: o.etcdFlags}
		opts.Rejoin = func(ctx context.Context) (err error) {
			joined, err = o.join(ctx, j, spec)
			return err
		}
	}
	res, err := guard.Run(ctx, opts)
	if res == nil {
		return nil, err
	}
	return &guardResult{Result: *res, Joined: joined}, err
}

// join connects to the cluster and adds the member back.
func (o *guardOptions) join(ctx context.Context, j *member.Joiner, spec member.JoinSpec) (*member.Joined, error) {
	cli, err := o.conn.Client()
	if err != nil {
		return nil, fmt.Errorf("connect to the cluster: %w", err)
	}
	defer cli.Close()
	j.Client = cli
	return j.Join(ctx, spec)
}

// guardFailed gives a guard run that stopped its exit code (3: could not run) and the hint
// for the stage it stopped at.
func guardFailed(err error, dataDir string) error {
	var stopped *guard.Error
	if !errors.As(err, &stopped) {
		return err
	}
	hint := ""
	switch stopped.Stage {
	case guard.StageLock:
		return lockFailed(stopped.Err)
	case guard.StageUnfinished:
		hint = "finish or move the unfinished quarantine by hand first"
	case guard.StageFinish:
		hint = "nothing was deleted: each file its manifest lists is either in the unfinished quarantine or still in the data dir (or WAL dir)"
	case guard.StageInspect:
		switch {
		case errors.Is(err, guard.ErrDBFile):
			hint = "give the directory etcd runs with as --data-dir"
		case errors.Is(err, datadir.ErrLocked):
			hint = "guard runs before the member starts; stop it first"
		}
	case guard.StageQuarantine:
		hint = "nothing was deleted; whatever was moved is under " + dataDir + datadir.QuarantineFolder + " (or inside the data dir's " + datadir.QuarantineFolder + "); if the error is a checksum mismatch, compare the files by hand before anything else"
	case guard.StageRejoin:
		hint = "run the same command again: a member already added is picked up where it stopped"
	}
	return failf(hint, "%v", stopped.Err)
}

// lockFailed turns a run lock that was refused (another run holds it) or could not be taken
// into "could not run" (exit 3): one line, naming the holder.
func lockFailed(err error) error {
	var held *runlock.HeldError
	if errors.As(err, &held) {
		return &cliError{code: exitFailed, err: err}
	}
	return failf("etcdmedic takes a lock file beside the data dir or plan dir (or under the temp dir when its parent is read-only) so that one run at a time changes it", "%v", err)
}

// etcdCommand is how a locally started member runs: the given command line, or this
// etcdmedic's linked etcd.
func etcdCommand(given string) ([]string, error) {
	if given != "" {
		return strings.Fields(given), nil
	}
	return linkedEtcdCommandLine()
}
