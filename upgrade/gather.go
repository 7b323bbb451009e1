package upgrade

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/etcdmedic/etcdmedic/backup"
	"github.com/etcdmedic/etcdmedic/cluster"
	"github.com/etcdmedic/etcdmedic/datadir"
)

// DataDir is a member's data dir, named as the member, with its WAL dir when it lives apart.
type DataDir struct {
	Name    string
	DataDir string
	WALDir  string
}

// GatherOptions says where the facts of a cluster come from: the live members, copies of
// their dbs, stopped members' data dirs, or a mix.
type GatherOptions struct {
	// Online asks the members through Conn for their versions; offline, only DataDirs are read.
	Online bool
	Conn   cluster.Conn
	// FetchBackends copies each live voter's db through the snapshot API into a private
	// temporary file, to read its v3 membership: online, v3.5 shows only its v2 store. It
	// streams every member's whole db once; the copies are removed after.
	FetchBackends bool
	// FetchTimeout bounds each member's copy (0: 10 minutes).
	FetchTimeout time.Duration
	// DataDirs are stopped members' data dirs: what they hold replaces the membership facts of
	// the member of the same name.
	DataDirs []DataDir
	// From is the version the members run, when they are not asked (nil: the lowest version a
	// live member answers with).
	From *Version
}

// Facts is what is known of a cluster before it moves to another version.
type Facts struct {
	Members []MemberFacts
	// Current is the version the upgrade is judged from: From, or the lowest a member runs.
	Current *Version
	// View is the live cluster as observed (nil offline).
	View *cluster.View
}

var (
	// ErrNoMemberAnswered: online, not one member answered.
	ErrNoMemberAnswered = errors.New("no member answered")
	// ErrVersionUnknown: no member answered with its version and none was given.
	ErrVersionUnknown = errors.New("the current version is unknown")
)

// Gather collects the versions (live) and the membership (data dirs, or fetched dbs) of a
// cluster's members.
func Gather(ctx context.Context, o GatherOptions) (*Facts, error) {
	facts := &Facts{}
	if o.Online {
		if err := facts.observe(ctx, o); err != nil {
			return nil, err
		}
	}
	for _, d := range o.DataDirs {
		r, err := datadir.Inspect(d.DataDir, datadir.Options{WALDir: d.WALDir})
		if err != nil {
			return nil, fmt.Errorf("member %s: %w", d.Name, err)
		}
		facts.merge(FactsFromReport(d.Name, "data dir", r))
	}
	if o.From != nil {
		facts.Current = o.From
	}
	if facts.Current == nil {
		return nil, ErrVersionUnknown
	}
	return facts, nil
}

// observe asks every member for its version, and for its db with FetchBackends.
func (facts *Facts) observe(ctx context.Context, o GatherOptions) error {
	facts.View = cluster.Observe(ctx, o.Conn)
	for _, m := range facts.View.Members {
		f := MemberFacts{Name: m.Name, Source: "live status"}
		if !m.Up() {
			f.Error = "not reachable"
			facts.Members = append(facts.Members, f)
			continue
		}
		f.Version, f.StorageVersion = m.Probe.Status.Version, m.Probe.Status.StorageVersion
		if ver, err := ParseVersion(f.Version); err == nil && (facts.Current == nil || ver.LessThan(*facts.Current)) {
			facts.Current = ver
		}
		if o.FetchBackends && !m.IsLearner {
			f = fetchFacts(ctx, o, m, f)
		}
		facts.Members = append(facts.Members, f)
	}
	if ctx.Err() != nil {
		// Interrupted (SIGINT, SIGTERM): what was probed or fetched so far backs no verdict.
		return fmt.Errorf("gather the members' facts: %w", context.Cause(ctx))
	}
	if len(facts.Members) == 0 {
		return ErrNoMemberAnswered
	}
	return nil
}

// merge puts a data dir's membership facts on the member of the same name, keeping the
// version it answered with.
func (facts *Facts) merge(f MemberFacts) {
	for i := range facts.Members {
		if facts.Members[i].Name == f.Name {
			f.Version = facts.Members[i].Version
			facts.Members[i] = f
			return
		}
	}
	facts.Members = append(facts.Members, f)
}

// fetchFacts reads m's v3 membership from a copy of its db; a copy that fails is the
// member's error, not the check's.
func fetchFacts(ctx context.Context, o GatherOptions, m cluster.MemberView, live MemberFacts) MemberFacts {
	timeout := o.FetchTimeout
	if timeout == 0 {
		timeout = 10 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	r, err := fetchReport(ctx, o.Conn, m.Probe.Endpoint)
	if err != nil {
		live.Error = err.Error()
		return live
	}
	f := FactsFromReport(m.Name, "fetched db", r)
	f.Version = live.Version
	if f.StorageVersion == "" {
		f.StorageVersion = live.StorageVersion
	}
	return f
}

// fetchReport streams the db of the member at endpoint into a temporary file and reads it.
// The copy holds every Secret of the cluster: its owner's only, in MkdirTemp's 0700 folder,
// and removed (the deferred RemoveAll) also when a signal cancels ctx mid-stream.
func fetchReport(ctx context.Context, conn cluster.Conn, endpoint string) (*datadir.Report, error) {
	tmp, err := os.MkdirTemp("", "etcdmedic-fetch-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	cli, err := conn.ClientFor(endpoint)
	if err != nil {
		return nil, err
	}
	defer cli.Close()
	path := filepath.Join(tmp, "db")
	if _, err := backup.SaveSnapshot(ctx, cli, path); err != nil {
		return nil, err
	}
	return datadir.Inspect(path, datadir.Options{})
}

// PrepareOptions is what an upgrade plan is made of.
type PrepareOptions struct {
	// Conn reaches the live cluster: each member's version and db are read through it.
	Conn   cluster.Conn
	Target *Version
	// DataDirs are every member's data dir: apply restarts each member on its own.
	DataDirs []DataDir
	// Binaries maps a version ("v3.6.16") to its etcd binary: the target's and every hop's.
	Binaries  map[string]string
	BackupDir string
	// EtcdFlags are extra flags every member restarts with.
	EtcdFlags []string
	// PassEnv are the ETCD_* variables (NAME=value) every restarted member gets.
	PassEnv []string
	Now     time.Time
}

// NoDataDirError says which member of the cluster has no data dir among those given.
type NoDataDirError struct{ Member string }

func (e *NoDataDirError) Error() string { return fmt.Sprintf("no --data-dir for member %s", e.Member) }

// Prepare makes the plan of an upgrade of the live cluster to o.Target: each member's db
// fetched and checked, the hops laid out, the members restarted followers first and the
// leader last.
func Prepare(ctx context.Context, o PrepareOptions) (*Plan, error) {
	facts, err := Gather(ctx, GatherOptions{Online: true, Conn: o.Conn, FetchBackends: true})
	if err != nil {
		return nil, err
	}
	members, err := restartOrder(facts.View, o.DataDirs)
	if err != nil {
		return nil, err
	}
	check := Check(facts.Current, o.Target, facts.Members)
	p, err := NewPlan(check, facts.Current, o.Target, members, o.Binaries, o.BackupDir, o.EtcdFlags, o.Now)
	if err != nil {
		return nil, err
	}
	p.PassEnv = o.PassEnv
	return p, nil
}

// restartOrder lists the members as apply restarts them, each on its data dir: followers
// first, the leader last, so that a hop causes one election at most.
func restartOrder(v *cluster.View, dirs []DataDir) ([]Member, error) {
	var members []Member
	var leader *Member
	for _, m := range v.Members {
		i := -1
		for j, d := range dirs {
			if d.Name == m.Name {
				i = j
			}
		}
		if i < 0 {
			return nil, &NoDataDirError{Member: m.Name}
		}
		um := Member{Name: m.Name, DataDir: dirs[i].DataDir, WALDir: dirs[i].WALDir, PeerURLs: m.PeerURLs, ClientURLs: m.ClientURLs}
		if m.ID == v.Leader() {
			leader = &um
			continue
		}
		members = append(members, um)
	}
	if leader != nil {
		members = append(members, *leader)
	}
	return members, nil
}
