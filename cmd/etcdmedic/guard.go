package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/etcdmedic/etcdmedic/cluster"
	"github.com/etcdmedic/etcdmedic/datadir"
	"github.com/etcdmedic/etcdmedic/guard"
	"github.com/etcdmedic/etcdmedic/member"
	"github.com/etcdmedic/etcdmedic/runlock"
	"github.com/etcdmedic/etcdmedic/runtime/local"
)

// guardResult is the JSON of `etcdmedic guard`.
type guardResult struct {
	DataDir     string             `json:"dataDir"`
	Verdict     guard.Verdict      `json:"verdict"`
	Quarantined *guard.Quarantined `json:"quarantined,omitempty"`
	Joined      *member.Joined     `json:"joined,omitempty"`
	Next        []string           `json:"next"`
}

type guardOptions struct {
	connFlags
	dataDir    string
	name       string
	peerURLs   []string
	clientURLs []string
	fix        bool
	rejoin     bool
	start      bool
	etcdFlags  []string
	passEnv    []string // --pass-env names
	startEnv   []string // their NAME=value, read before anything changes
	etcdCmd    string
	from       deploymentFlags
	walDir     string // settled from --wal-dir or the deployment
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
  FOREIGN     another cluster's data (or an older incarnation of this one), or not etcd data
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

Exit codes: 0 safe to start, 2 not safe (run again with --fix), 3 UNKNOWN, UNREADABLE or could
not run.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			dataDir, walDir, spec, err := o.from.dataDirFrom(o.dataDir)
			if err != nil {
				return failf("give the member's data dir: --data-dir /var/lib/etcd (or --from-process, --from-config, --from-unit)", "%v", err)
			}
			o.dataDir, o.walDir = dataDir, walDir
			if spec != nil {
				o.name = cmp.Or(o.name, spec.Name)
				if len(o.peerURLs) == 0 {
					o.peerURLs = spec.PeerURLs
				}
				if len(o.clientURLs) == 0 {
					o.clientURLs = spec.ClientURLs
				}
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
			res, err := o.run(cmd.Context(), cmd.ErrOrStderr())
			p, _ := printerFor(opts.writeOut)
			if res != nil { // also when a later step failed: say what was done (quarantined, added)
				if perr := p.Guard(cmd.OutOrStdout(), *res); perr != nil {
					return perr
				}
			}
			if err != nil {
				return err
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
	f.BoolVar(&o.fix, "fix", false, "quarantine a data dir that is not safe to start on (moved aside, never deleted)")
	f.BoolVar(&o.rejoin, "rejoin", false, "after --fix (or on an empty dir), add the member back as a learner")
	f.BoolVar(&o.start, "start", false, "with --rejoin: also start it as a local process of the linked etcd, wait until it caught up, and promote it")
	f.StringVar(&o.etcdCmd, "etcd-command", "", "with --start: how to run etcd, e.g. \"/usr/local/bin/etcd\" (default: the etcd linked into etcdmedic)")
	f.StringArrayVar(&o.etcdFlags, "etcd-flag", nil, "with --start: an extra etcd flag (repeatable), e.g. --etcd-flag=--snapshot-count=10000")
	f.StringArrayVar(&o.passEnv, "pass-env", nil, "with --start: "+passEnvUsage)
	return cmd
}

func (o *guardOptions) run(ctx context.Context, progress io.Writer) (*guardResult, error) {
	res := &guardResult{DataDir: o.dataDir, Next: []string{}}
	// Before the lock: a run that cannot read the data dir creates nothing, not even its lock.
	if v, ok := guard.CheckReadable(o.dataDir); !ok {
		res.Verdict = v
		rerun := "Run the same guard command as the data dir's owner or as root."
		if o.fix {
			rerun += " --fix moved nothing."
		}
		res.Next = append(res.Next, "Do not start etcd on this data dir and do not delete it: etcdmedic could not read it, so nothing says whose data it is.", rerun)
		return res, nil
	}
	if o.fix || o.rejoin {
		// Locked before the data dir is read: a verdict on what another run is moving or
		// starting a member on would be stale by the time this run acts on it.
		l, err := runlock.Acquire(o.dataDir, o.purpose())
		if err != nil {
			return nil, lockFailed(err)
		}
		defer l.Release()
	}
	if partial, err := guard.Unfinished(o.dataDir); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, failf("finish or move the unfinished quarantine by hand first", "%v", err)
	} else if partial != "" {
		// An interrupted --fix may have moved the files already: the data dir then looks empty.
		if !o.fix {
			res.Next = append(res.Next, fmt.Sprintf("An interrupted quarantine of this data dir is unfinished in %s (its files may be there, not in the data dir): run guard again with --fix to finish it before anything else.", partial))
			res.Verdict = guard.Verdict{Class: guard.Unknown, Reason: "an unfinished quarantine of it is in " + partial}
			return res, nil
		}
		q, err := guard.Finish(o.dataDir, time.Now())
		if err != nil {
			return nil, failf("nothing was deleted: the files are in "+partial, "finish the quarantine of %s: %v", o.dataDir, err)
		}
		res.Quarantined = q
		fmt.Fprintf(progress, "finished the interrupted quarantine: %s\n", q.Dir)
	}
	var report *datadir.Report
	if _, err := os.Stat(o.dataDir); err == nil {
		report, err = datadir.Inspect(o.dataDir, datadir.Options{WALDir: o.walDir})
		if err == nil && report.Kind == datadir.KindDBFile {
			return nil, failf("give the directory etcd runs with as --data-dir", "%s is a db file, not a data dir", o.dataDir)
		}
		if err != nil {
			if errors.Is(err, datadir.ErrLocked) {
				return nil, failf("guard runs before the member starts; stop it first", "a process is running on %s: %v", o.dataDir, err)
			}
			return nil, &cliError{code: exitFailed, err: err}
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, failf("", "%v", err)
	}
	view := cluster.Observe(ctx, o.conn)
	res.Verdict = guard.Classify(report, view, guard.Expect{Name: o.name, PeerURLs: o.peerURLs})
	if res.Verdict.Class == guard.Unknown {
		res.Next = append(res.Next, "Do not start the member and do not delete this data dir: it may hold the only copy of recent data.",
			"Recover quorum first: etcdmedic doctor, then etcdmedic inspect on each stopped member.")
		return res, nil
	}
	if !res.Verdict.Safe && res.Verdict.Class != guard.Empty {
		if !res.Verdict.Movable {
			res.Next = append(res.Next, "Do not start etcd on this data dir; etcdmedic will not move it either: "+res.Verdict.Reason)
			return res, nil
		}
		if !o.fix {
			res.Next = append(res.Next, "Do not start etcd on this data dir.",
				fmt.Sprintf("Quarantine it (moved aside with checksums, never deleted): etcdmedic guard --data-dir %s --endpoints %s --fix", o.dataDir, o.endpointList()),
				fmt.Sprintf("Then add the member back as a new learner: etcdctl --endpoints %s member add %s --learner --peer-urls=%s (or add --rejoin to the guard command)", o.endpointList(), orName(o.name), strings.Join(o.peerURLs, ",")))
			return res, nil
		}
		q, err := guard.Quarantine(o.dataDir, report, res.Verdict, time.Now())
		if err != nil {
			return nil, failf("nothing was deleted; whatever was moved is under "+o.dataDir+datadir.QuarantineFolder+" (or inside the data dir's "+datadir.QuarantineFolder+"); if the error is a checksum mismatch, compare the files by hand before anything else", "quarantine %s: %v", o.dataDir, err)
		}
		res.Quarantined = q
	}
	joinable := res.Verdict.Class == guard.Empty || res.Quarantined != nil
	if !o.rejoin || !joinable {
		if joinable && (len(o.peerURLs) == 0 || !guard.MemberAdded(view, o.peerURLs)) {
			res.Next = append(res.Next, fmt.Sprintf("The data dir is empty: add the member before it starts (etcdctl --endpoints %s member add %s --learner --peer-urls=%s), then start it with --initial-cluster-state=existing, or rerun guard with --rejoin.", o.endpointList(), orName(o.name), strings.Join(o.peerURLs, ",")))
		}
		return res, nil
	}
	cli, err := o.conn.Client()
	if err != nil {
		return nil, failf("", "connect to the cluster: %v", err)
	}
	defer cli.Close()
	j := &member.Joiner{Client: cli, Out: progress}
	if o.start {
		command, err := etcdCommand(o.etcdCmd)
		if err != nil {
			return nil, err
		}
		j.Runtime = local.Runtime{Command: command, Env: o.startEnv}
	}
	joined, err := j.Join(ctx, member.JoinSpec{Name: o.name, PeerURLs: o.peerURLs, ClientURLs: o.clientURLs, DataDir: o.dataDir, ExtraFlags: o.etcdFlags})
	res.Joined = joined
	if err != nil {
		return res, failf("run the same command again: a member already added is picked up where it stopped", "rejoin %s: %v", o.name, err)
	}
	return res, nil
}

// purpose is what a run that is refused the data dir's lock is told this run does.
func (o *guardOptions) purpose() string {
	p := "guard"
	if o.fix {
		p += " --fix"
	}
	if o.rejoin {
		p += " --rejoin"
	}
	return p
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

func orName(name string) string {
	if name == "" {
		return "<NAME>"
	}
	return name
}

// etcdCommand is how a locally started member runs: the given command line, or this
// etcdmedic's linked etcd.
func etcdCommand(given string) ([]string, error) {
	if given != "" {
		return strings.Fields(given), nil
	}
	return linkedEtcdCommandLine()
}
