package guard

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/etcdmedic/etcdmedic"
	"github.com/etcdmedic/etcdmedic/backup"
	"github.com/etcdmedic/etcdmedic/cluster"
	"github.com/etcdmedic/etcdmedic/datadir"
	"github.com/etcdmedic/etcdmedic/runlock"
)

// nobodyListens is a cluster whose only endpoint refuses connections: every verdict that needs
// the live cluster is UNKNOWN. The flows below that do not need it run without one.
func nobodyListens(t *testing.T) cluster.Conn {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	conn := cluster.DefaultConn()
	conn.Endpoints, conn.DialTimeout, conn.CommandTimeout = []string{addr}, time.Second, 2*time.Second
	return conn
}

func options(t *testing.T, dataDir string) Options {
	return Options{Conn: nobodyListens(t), DataDir: dataDir, Expect: Expect{Name: "pd-3", PeerURLs: []string{newPeer}}, Now: func() time.Time { return now }}
}

// seeing is opts whose live cluster is v, as the probes would find it.
func seeing(opts Options, v *cluster.View) Options {
	opts.Observe = func(context.Context, cluster.Conn) *cluster.View { return v }
	return opts
}

// healthyPD is incident 1's cluster with pd-0, pd-1 and pd-2 up; pd-3 not added.
func healthyPD() *cluster.View {
	return answers([]etcdmedic.Member{pd0, pd1, pd2}, pd0, pd1, pd2)
}

// Without quorum (here: nobody answers) guard does not guess, and --fix moves nothing, not
// even what is plainly not etcd's: the rejoin never runs.
func TestRunWithoutTheClusterMovesNothing(t *testing.T) {
	dataDir := notEtcd(t, "join").Path
	before := listTree(t, dataDir)
	opts := options(t, dataDir)
	opts.Fix = true
	opts.Rejoin = func(context.Context) error { t.Error("rejoined without a verdict"); return nil }
	res, err := Run(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if res.Verdict.Class != Unknown || res.Quarantined != nil || !strings.Contains(strings.Join(res.Next, " "), "Recover quorum first") {
		t.Fatalf("%+v", res)
	}
	if after := listTree(t, dataDir); !slices.Equal(after, before) {
		t.Errorf("the data dir held %v, now %v", before, after)
	}
}

// An empty data dir may take the member: Rejoin runs, holding the data dir's lock, and its
// failure comes back with the result as a rejoin error.
func TestRunRejoinsOnAnEmptyDataDirUnderItsLock(t *testing.T) {
	dataDir := t.TempDir()
	opts := seeing(options(t, dataDir), healthyPD())
	rejoined := false
	opts.Rejoin = func(context.Context) error {
		rejoined = true
		var held *runlock.HeldError
		if l, err := runlock.Acquire(dataDir, "a second guard"); err == nil {
			l.Release()
			t.Error("the data dir's lock is free while the member rejoins")
		} else if !errors.As(err, &held) {
			t.Errorf("the data dir's lock: %v", err)
		}
		return errors.New("member add: etcdserver: unhealthy cluster")
	}
	res, err := Run(t.Context(), opts)
	var stopped *Error
	if !rejoined || res == nil || res.Verdict.Class != Empty || !errors.As(err, &stopped) || stopped.Stage != StageRejoin {
		t.Fatalf("rejoined %v, result %+v, error %v", rejoined, res, err)
	}
	if !strings.Contains(err.Error(), "rejoin pd-3: member add") {
		t.Errorf("error %q does not say what failed", err)
	}
	if len(res.Next) != 0 {
		t.Errorf("a rejoin asked for, yet next steps: %v", res.Next)
	}
}

// Without --rejoin, an empty data dir's member must be added before it starts.
func TestRunSaysToAddTheMemberFirst(t *testing.T) {
	res, err := Run(t.Context(), seeing(options(t, t.TempDir()), healthyPD()))
	if err != nil {
		t.Fatal(err)
	}
	if next := strings.Join(res.Next, " "); res.Verdict.Class != Empty || !strings.Contains(next, "member add pd-3 --learner --peer-urls="+newPeer) {
		t.Fatalf("%s: %v", res.Verdict.Class, res.Next)
	}
}

// A run refused the data dir's lock changes nothing and names the other run.
func TestRunRefusedTheLockTouchesNothing(t *testing.T) {
	dataDir := notEtcd(t, "join").Path
	other, err := runlock.Acquire(dataDir, "guard --fix")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Release()
	opts := options(t, dataDir)
	opts.Fix = true
	res, err := Run(t.Context(), opts)
	var stopped *Error
	var held *runlock.HeldError
	if res != nil || !errors.As(err, &stopped) || stopped.Stage != StageLock || !errors.As(err, &held) {
		t.Fatalf("result %+v, error %v", res, err)
	}
}

// A db file given as the data dir is not judged: guard is told the directory etcd runs with.
func TestRunRefusesADBFile(t *testing.T) {
	db := filepath.Join(t.TempDir(), "db")
	bdb, err := bolt.Open(db, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = bdb.Update(func(tx *bolt.Tx) error { _, err := tx.CreateBucket([]byte("meta")); return err })
	bdb.Close()
	if err != nil {
		t.Fatal(err)
	}
	_, err = Run(t.Context(), options(t, db))
	var stopped *Error
	if !errors.As(err, &stopped) || stopped.Stage != StageInspect || !errors.Is(err, ErrDBFile) {
		t.Fatalf("error %v", err)
	}
}

// An interrupted --fix left its files in a quarantine folder and the data dir looks empty:
// without --fix guard says so and judges nothing; with it, the quarantine is finished first.
func TestRunFinishesAnInterruptedQuarantineOnlyWithFix(t *testing.T) {
	dataDir := filepath.Join(t.TempDir(), "pd")
	writeFiles(t, dataDir, map[string]string{"join": "pd-0=http://10.0.0.10:2380"})
	sums, total, err := backup.Checksum(dataDir, datadir.Ignorable)
	if err != nil {
		t.Fatal(err)
	}
	partial := filepath.Join(dataDir+datadir.QuarantineFolder, "20261201T030000Z-removed"+partialSuffix)
	m := Manifest{Source: dataDir, RealSource: dataDir, CreatedAt: now, Class: Removed, Reason: "pd-2 was removed", Entries: []string{"join"}, Files: sums, Bytes: total}
	if err := os.MkdirAll(filepath.Join(partial, "data"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := backup.WriteJSONAtomic(filepath.Join(partial, "manifest.json"), m); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dataDir, "join"), filepath.Join(partial, "data", "join")); err != nil {
		t.Fatal(err)
	}

	res, err := Run(t.Context(), seeing(options(t, dataDir), healthyPD()))
	if err != nil || res.Verdict.Class != Unknown || res.Quarantined != nil || !strings.Contains(strings.Join(res.Next, " "), "run guard again with --fix") {
		t.Fatalf("without --fix: %+v, %v", res, err)
	}
	opts := seeing(options(t, dataDir), healthyPD())
	opts.Fix = true
	res, err = Run(t.Context(), opts)
	if err != nil || res.Quarantined == nil || res.Verdict.Class != Empty {
		t.Fatalf("with --fix: %+v, %v", res, err)
	}
	if got := readManifest(t, res.Quarantined.Dir); got.Class != Removed || got.Reason != "pd-2 was removed" {
		t.Errorf("the finished quarantine says %s: %q, want the interrupted run's reason", got.Class, got.Reason)
	}
	if err := Verify(res.Quarantined.Dir); err != nil {
		t.Fatal(err)
	}
}

// kubeadm reset (incident 2, step 3): pd-2's data dir was wiped, but pd-2 is still a started
// member. etcd would panic on the empty log; guard says to replace it, and neither --fix nor
// --rejoin does anything: there is nothing to move, and pd-2 is in the membership already.
func TestRunRefusesTheEmptyDataDirOfAMemberThatRanBefore(t *testing.T) {
	dataDir := t.TempDir()
	opts := seeing(options(t, dataDir), healthyPD())
	opts.Expect = Expect{Name: "pd-2", PeerURLs: pd2.PeerURLs}
	opts.Fix = true
	opts.Rejoin = func(context.Context) error { t.Error("rejoined a member whose data is gone"); return nil }
	res, err := Run(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	next := strings.Join(res.Next, " ")
	if res.Verdict.Class != Empty || res.Verdict.Safe || res.Quarantined != nil || !strings.Contains(next, "etcdmedic member replace pd-2 --name pd-2 --peer-urls "+pd2.PeerURLs[0]) {
		t.Fatalf("%s (safe %v): %v", res.Verdict.Class, res.Verdict.Safe, res.Next)
	}
	if strings.Contains(next, "--fix") {
		t.Errorf("--fix moves nothing here, yet suggested: %s", next)
	}
}

// Nobody answered: an empty data dir of a member named by its peer URLs is not judged, for
// that member may have run before; and the next step is not quorum recovery.
func TestRunDoesNotJudgeAnEmptyDataDirWithoutTheCluster(t *testing.T) {
	opts := options(t, t.TempDir())
	opts.Rejoin = func(context.Context) error { t.Error("rejoined without a verdict"); return nil }
	res, err := Run(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if next := strings.Join(res.Next, " "); res.Verdict.Class != Unknown || !strings.Contains(next, "Check --endpoints") || strings.Contains(next, "quorum") || !strings.Contains(next, "--initial-cluster-state new") {
		t.Fatalf("%s: %v", res.Verdict.Class, res.Next)
	}
}

// The first start of a new cluster, guard in every member's ExecStartPre= or init container:
// no member answers yet, and the member says it bootstraps (--initial-cluster-state=new): it
// may start, and guard does not tell it to be added to a cluster that does not exist yet.
func TestRunLetsANewClusterForm(t *testing.T) {
	opts := options(t, t.TempDir())
	opts.Expect.Bootstraps = true
	res, err := Run(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if v := res.Verdict; v.Class != Empty || !v.Safe || len(res.Next) > 0 {
		t.Fatalf("%s (safe %v): %s; next %v", v.Class, v.Safe, v.Reason, res.Next)
	}
}

// rm -rf /var/lib/etcd, its WAL on a disk of its own left as it was: etcd started with that
// --wal-dir would replay the old log without its data. A missing data dir is judged as an
// empty one with that WAL: INCOMPLETE, never EMPTY, and neither moved nor rejoined.
func TestRunJudgesAMissingDataDirWithItsWALDir(t *testing.T) {
	root := t.TempDir()
	wal := filepath.Join(root, "wal")
	writeFiles(t, wal, map[string]string{seg0: "wal0"})
	for _, how := range []string{"missing", "empty"} {
		dataDir := filepath.Join(root, "data-"+how)
		if how == "empty" {
			if err := os.Mkdir(dataDir, 0o700); err != nil {
				t.Fatal(err)
			}
		}
		opts := seeing(options(t, dataDir), healthyPD())
		opts.WALDir, opts.Fix = wal, true
		opts.Rejoin = func(context.Context) error { t.Error("rejoined on a WAL without its data"); return nil }
		res, err := Run(t.Context(), opts)
		if err != nil {
			t.Fatalf("%s data dir: %v", how, err)
		}
		if v := res.Verdict; v.Class != Incomplete || v.Safe || v.Movable || res.Quarantined != nil || !strings.Contains(v.Reason, "holds .wal files") {
			t.Errorf("%s data dir: %s (safe %v, movable %v): %s", how, v.Class, v.Safe, v.Movable, v.Reason)
		}
	}
	if got := byPath(t, wal); len(got) != 1 || got[seg0] == "" {
		t.Errorf("the WAL dir now holds %v", got)
	}
}

// A VALID data dir is not judged on its raft index, so the remedy says what a rolled-back copy
// of the member's own data does when started, and what to do then.
func TestRunSaysWhatARolledBackCopyDoes(t *testing.T) {
	dataDir := t.TempDir()
	opts := seeing(options(t, dataDir), healthyPD())
	opts.Expect = Expect{Name: "pd-1", PeerURLs: pd1.PeerURLs}
	verdict := Classify(member(datadir.KindEtcdMember, liveID, pd1.ID, "pd-1"), healthyPD(), opts.Expect)
	res := &Result{Verdict: verdict}
	if goOn, err := opts.act(res, nil, healthyPD()); !goOn || err != nil {
		t.Fatalf("act: %v %v", goOn, err)
	}
	if next := strings.Join(res.Next, " "); !strings.Contains(next, "tocommit(N) is out of range [lastIndex(M)]") || !strings.Contains(next, "etcdmedic member replace pd-1 --name pd-1") {
		t.Errorf("next: %s", next)
	}
}
