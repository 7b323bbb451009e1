package guard

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/etcdmedic/etcdmedic/cluster"
	"github.com/etcdmedic/etcdmedic/datadir"
	"github.com/etcdmedic/etcdmedic/runlock"
)

// Options are one guard run: the data dir a member is about to start on, the member it will
// start as, and what the run may do about it.
type Options struct {
	// Conn reaches the live cluster the member is about to join.
	Conn    cluster.Conn
	DataDir string
	// WALDir is the member's --wal-dir when its WAL lives apart; "" for member/wal.
	WALDir string
	// Expect is the name and peer URLs the member will start with.
	Expect Expect
	// Fix quarantines a data dir the member may not start on, and finishes an interrupted
	// quarantine of it.
	Fix bool
	// Rejoin, when set, adds the member back once its data dir may take it (emptied by Fix, or
	// empty), under the data dir's lock: member.Joiner's Join, for guard --rejoin. A function,
	// as package member judges its own new data dirs with this one.
	Rejoin func(ctx context.Context) error
	// Progress gets a line for what the run does besides judging; nil for none.
	Progress io.Writer
	// Now is the quarantine's clock; nil for time.Now.
	Now func() time.Time
	// MemberFlags are the flags that named the member on the command line (--from-config FILE,
	// or --data-dir, --wal-dir, --name, --peer-urls), for the commands guard prints; nil: built
	// from DataDir, WALDir and Expect.
	MemberFlags []string
	// Observe builds the live cluster's view; nil for cluster.Observe (tests give a view).
	Observe func(ctx context.Context, conn cluster.Conn) *cluster.View
}

// Result is what a guard run found and did, and what the operator does next.
type Result struct {
	DataDir     string       `json:"dataDir"`
	Verdict     Verdict      `json:"verdict"`
	Quarantined *Quarantined `json:"quarantined,omitempty"`
	Next        []string     `json:"next"`
}

// Stage is the part of a run an error comes from: the command gives each its own hint.
type Stage string

const (
	StageLock       Stage = "lock"       // taking the data dir's run lock
	StageUnfinished Stage = "unfinished" // looking for an interrupted quarantine
	StageFinish     Stage = "finish"     // finishing it
	StageInspect    Stage = "inspect"    // reading the data dir
	StageQuarantine Stage = "quarantine" // moving it aside
	StageRejoin     Stage = "rejoin"     // adding the member back
)

// Error is a run that stopped at one stage; it reads as the error it wraps.
type Error struct {
	Stage Stage
	Err   error
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// ErrDBFile is a data dir given as etcd's db file: guard judges the directory etcd runs with.
var ErrDBFile = errors.New("a db file, not a data dir")

// Run judges the data dir a member is about to start on against the live cluster, and does
// what opts allow: finish an interrupted quarantine, quarantine a data dir the member may not
// start on (Fix), add the member back (Rejoin). A data dir it cannot read is judged
// UNREADABLE before anything is created, not even the lock. A failed rejoin returns the
// result too: it says what was done before (the quarantine).
func Run(ctx context.Context, opts Options) (*Result, error) {
	res := &Result{DataDir: opts.DataDir, Next: []string{}}
	if v, ok := CheckReadable(opts.DataDir); !ok {
		res.Verdict = v
		res.next("Do not start etcd on this data dir and do not delete it: etcdmedic could not read it, so nothing says whose data it is.", opts.rerunAsOwner())
		return res, nil
	}
	if opts.Fix || opts.Rejoin != nil {
		// Locked before the data dir is read: a verdict on what another run is moving or
		// starting a member on would be stale by the time this run acts on it.
		l, err := runlock.Acquire(opts.DataDir, opts.purpose())
		if err != nil {
			return nil, &Error{StageLock, err}
		}
		defer l.Release()
	}
	if stop, err := opts.finishInterrupted(res); stop || err != nil {
		return nilOnError(res, err)
	}
	report, err := inspect(opts.DataDir, opts.WALDir)
	if err != nil {
		return nil, &Error{StageInspect, err}
	}
	view := opts.observe(ctx)
	want := opts.Expect
	want.Starts = true // a member is about to start here: FOREIGN needs its cluster proven
	res.Verdict = Classify(report, view, want)
	if goOn, err := opts.act(res, report, view); !goOn || err != nil {
		return nilOnError(res, err)
	}
	return res, opts.rejoin(ctx, res, view)
}

// finishInterrupted finishes an interrupted quarantine of the data dir with Fix, and without
// stops the run: an interrupted --fix may have moved the files already, and the data dir then
// looks empty.
func (o Options) finishInterrupted(res *Result) (stop bool, err error) {
	partial, err := Unfinished(o.DataDir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return true, &Error{StageUnfinished, err}
	}
	if partial == "" {
		return false, nil
	}
	if !o.Fix {
		res.Verdict = verdict(Unknown, "an unfinished quarantine of it is in "+partial)
		res.next(fmt.Sprintf("An interrupted quarantine of this data dir is unfinished in %s (its files may be there, not in the data dir): run guard again with --fix to finish it before anything else.", partial))
		return true, nil
	}
	q, err := Finish(o.DataDir, o.now())
	if err != nil {
		return true, &Error{StageFinish, fmt.Errorf("finish the quarantine of %s (%s lists its files; each is either there or still in the data dir): %w", o.DataDir, filepath.Join(partial, "manifest.json"), err)}
	}
	res.Quarantined = q
	if o.Progress != nil {
		fmt.Fprintf(o.Progress, "finished the interrupted quarantine: %s\n", q.Dir)
	}
	return false, nil
}

// inspect reads the data dir offline: nil when it does not exist (a new member's), unless its
// WAL dir apart still holds a log: that is judged as an empty data dir with that WAL would be,
// half a member (etcd would replay the old log without its data).
func inspect(dataDir, walDir string) (*datadir.Report, error) {
	if _, err := os.Stat(dataDir); errors.Is(err, fs.ErrNotExist) {
		if wal, err := holdsWAL(walDir); err != nil {
			return nil, err
		} else if wal {
			return &datadir.Report{Path: dataDir, Kind: datadir.KindWALWithoutData, MemberDir: filepath.Join(dataDir, "member"), WALDir: walDir,
				KindReason: fmt.Sprintf("the WAL dir %s holds .wal files, but the data dir %s does not exist: etcd would replay a log without the data it was applied to", walDir, dataDir)}, nil
		}
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	report, err := datadir.Inspect(dataDir, datadir.Options{WALDir: walDir})
	switch {
	case errors.Is(err, datadir.ErrLocked):
		return nil, fmt.Errorf("a process is running on %s: %w", dataDir, err)
	case err != nil:
		return nil, err
	case report.Kind == datadir.KindDBFile:
		return nil, fmt.Errorf("%s is %w", dataDir, ErrDBFile)
	}
	return report, nil
}

// holdsWAL is true when dir (a --wal-dir; "" for none) has any .wal file: a name etcd would
// skip still counts, so that a doubt never reads as an empty member.
func holdsWAL(dir string) (bool, error) {
	if dir == "" {
		return false, nil
	}
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	} else if err != nil {
		return false, fmt.Errorf("read the WAL dir: %w", err)
	}
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".wal") {
			return true, nil
		}
	}
	return false, nil
}

// act quarantines a data dir the member may not start on when the run may (Fix), and says
// what to do next when it may not or must not; goOn is false when the run ends there.
func (o Options) act(res *Result, report *datadir.Report, view *cluster.View) (goOn bool, err error) {
	v := res.Verdict
	empty := report == nil || report.Kind == datadir.KindEmpty || report.Kind == datadir.KindBootstrapLeftover
	switch {
	case v.Class == Unknown && answering(view):
		// The cluster answered, but is not proven to be this member's (another cluster's data).
		res.next("Do not start etcd on this data dir, and do not move it: "+v.Reason+".",
			fmt.Sprintf("If %s are this cluster's endpoints, add the member first (%s), then run guard again; else run guard with this cluster's endpoints (--endpoints, or --discover-kubeadm).", strings.Join(o.Conn.Endpoints, ","), o.memberAdd()))
		return false, nil
	case v.Class == Unknown && empty:
		res.next("Do not start the member yet: with the live cluster out of reach, nothing tells whether it ran before (then its data is gone and it must be replaced) or is new (then it must be added first).",
			"Check --endpoints and the TLS flags (etcdmedic doctor), then run guard again; if the member bootstraps a new cluster, run it with --initial-cluster-state new.")
		return false, nil
	case v.Class == Unknown:
		res.next("Do not start the member and do not delete this data dir: it may hold the only copy of recent data.",
			"Recover quorum first: etcdmedic doctor, then etcdmedic inspect on each stopped member.")
		return false, nil
	case v.Class == Empty && v.LiveMember != nil:
		res.next(fmt.Sprintf("Do not start etcd on this empty data dir: member %s ran before and its data is gone; there is nothing here to move aside.", v.LiveMember.Label()),
			"Replace the member: "+o.memberReplace(v.LiveMember))
		return false, nil
	case v.Class == Valid:
		// Not judged on the raft index (a stopped member is always behind), so said here.
		res.next("If etcd then panics with \"tocommit(N) is out of range [lastIndex(M)]\", this data dir is an older copy of the member (restored from a VM or volume snapshot, or an old volume reused): do not start it again, and replace the member: " + o.memberReplace(v.LiveMember))
		return true, nil
	case v.Safe || v.Class == Empty:
		return true, nil
	case !v.Movable:
		res.next("Do not start etcd on this data dir; etcdmedic will not move it either: " + v.Reason)
		return false, nil
	case !o.Fix:
		res.next("Do not start etcd on this data dir.",
			"Quarantine it (moved aside with checksums, never deleted): "+o.guardCommand("--fix"),
			fmt.Sprintf("Then add the member back as a new learner: %s%s", o.memberAdd(), o.orRejoin()))
		return false, nil
	}
	q, err := Quarantine(o.DataDir, report, v, o.now())
	if err != nil {
		return false, &Error{StageQuarantine, fmt.Errorf("quarantine %s: %w", o.DataDir, err)}
	}
	res.Quarantined = q
	return true, nil
}

// rejoin adds the member back when the data dir may now take it and the run was asked to;
// otherwise it says how, unless the member is in the membership already.
func (o Options) rejoin(ctx context.Context, res *Result, view *cluster.View) error {
	if !res.joinable() {
		return nil
	}
	if o.Rejoin == nil {
		if o.Expect.Bootstraps && (view == nil || len(view.Members) == 0) {
			return nil // it forms a new cluster: nothing to add it to
		}
		if len(o.Expect.PeerURLs) == 0 || view.ByPeerURLs(o.Expect.PeerURLs) == nil {
			res.next(fmt.Sprintf("The data dir is empty: add the member before it starts (%s), then start it with --initial-cluster-state=existing, or rerun guard with --rejoin.", o.memberAdd()))
		}
		return nil
	}
	if err := o.Rejoin(ctx); err != nil {
		return &Error{StageRejoin, fmt.Errorf("rejoin %s: %w", o.Expect.Name, err)}
	}
	return nil
}

// joinable is true when a new member may join on the data dir: it is empty, or was emptied.
func (r *Result) joinable() bool { return r.Verdict.Class == Empty || r.Quarantined != nil }

func (r *Result) next(steps ...string) { r.Next = append(r.Next, steps...) }

func nilOnError(res *Result, err error) (*Result, error) {
	if err != nil {
		return nil, err
	}
	return res, nil
}

// purpose is what a run refused the data dir's lock is told this run does.
func (o Options) purpose() string {
	p := "guard"
	if o.Fix {
		p += " --fix"
	}
	if o.Rejoin != nil {
		p += " --rejoin"
	}
	return p
}

func (o Options) rerunAsOwner() string {
	if o.Fix {
		return "Run the same guard command as the data dir's owner or as root. --fix moved nothing."
	}
	return "Run the same guard command as the data dir's owner or as root."
}

func (o Options) observe(ctx context.Context) *cluster.View {
	if o.Observe == nil {
		return cluster.Observe(ctx, o.Conn)
	}
	return o.Observe(ctx, o.Conn)
}

func (o Options) now() time.Time {
	if o.Now == nil {
		return time.Now()
	}
	return o.Now()
}
