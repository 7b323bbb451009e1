package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdmedic/etcdmedic/guard"
	"github.com/etcdmedic/etcdmedic/internal/etcdtest"
	"github.com/etcdmedic/etcdmedic/runtime/local"
)

type guardJSON struct {
	Verdict     guard.Verdict      `json:"verdict"`
	Quarantined *guard.Quarantined `json:"quarantined"`
	Joined      *struct {
		MemberID string `json:"memberID"`
		Promoted bool   `json:"promoted"`
	} `json:"joined"`
	Next []string `json:"next"`
}

func runGuard(t *testing.T, args ...string) (int, guardJSON, string) {
	t.Helper()
	code, out, errOut := runCLI(t, append([]string{"guard", "-w", "json", "--command-timeout", "3s"}, args...)...)
	var g guardJSON
	if out != "" {
		if err := json.Unmarshal([]byte(out), &g); err != nil {
			t.Fatalf("guard printed no JSON (exit %d): %v\n%s\n%s", code, err, out, errOut)
		}
	}
	return code, g, errOut
}

// killLocalMember stops a member the local runtime started, when the test ends.
func killLocalMember(t *testing.T, dataDir string) {
	t.Cleanup(func() {
		b, err := os.ReadFile(local.PIDFile(dataDir))
		if err != nil {
			return
		}
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	})
}

// etcdmedicEtcd is the linked etcd as a command line (tests run in-process, where
// os.Executable is the test binary).
func etcdmedicEtcd(t *testing.T) string {
	return etcdtest.EtcdmedicBinary(t) + " etcd"
}

// addLearner is `etcdctl member add --learner` (never started), retried while etcd refuses a
// reconfiguration for the first seconds after its members started ("unhealthy cluster").
func addLearner(t *testing.T, cli *clientv3.Client, peerURLs ...string) *clientv3.MemberAddResponse {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		added, err := cli.MemberAddAsLearner(t.Context(), peerURLs)
		if err == nil {
			return added
		}
		if !strings.Contains(err.Error(), "unhealthy cluster") || time.Now().After(deadline) {
			t.Fatalf("member add --learner %v: %v", peerURLs, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// printedGuardCommand is the etcdmedic guard command a next step prints, as its arguments
// (split on spaces: the tests' paths have none).
func printedGuardCommand(t *testing.T, next []string) []string {
	t.Helper()
	for _, n := range next {
		if _, cmd, ok := strings.Cut(n, "etcdmedic guard "); ok {
			return strings.Fields(cmd)
		}
	}
	t.Fatalf("no guard command in the next steps: %v", next)
	return nil
}

func newURLs(t *testing.T) (client, peer string) {
	ports := freePortsForTest(t, 2)
	return fmt.Sprintf("http://127.0.0.1:%d", ports[0]), fmt.Sprintf("http://127.0.0.1:%d", ports[1])
}

// Incident 1, end to end: a member is failed over, its replacement lands on a volume that
// still holds the old data dir. Without etcdmedic it never becomes healthy; with
// `guard --fix --rejoin --start` it joins fresh, the old data is kept intact in quarantine,
// and no acknowledged write is lost.
func TestIncident1StaleVolumeRejoinsFresh(t *testing.T) {
	t.Parallel()
	c := etcdtest.NewCluster(t, etcdtest.ClusterSpec{Size: 3})
	ledger := etcdtest.StartLoad(t.Context(), t, c.Client(t), etcdtest.LoadSpec{Rate: 50})
	waitAcked(t, ledger, 20)

	m3 := c.Member("m3")
	if err := m3.Stop(); err != nil {
		t.Fatal(err)
	}
	volume := filepath.Join(t.TempDir(), "pv-0007") // the local volume the provisioner re-publishes
	copyDir(t, m3.DataDir, volume)
	c.RemoveMember(t, m3) // the failover: the old member leaves the cluster

	// The replacement pod starts on the reused volume: etcd ignores its flags, runs as the
	// removed member, and gives up.
	client, peer := newURLs(t)
	bin := etcdtest.Binary(t, etcdtest.Linked)
	stale := bin.Command("--name", "m3", "--data-dir", volume, "--listen-client-urls", client, "--advertise-client-urls", client,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer, "--initial-cluster", "m3="+peer, "--initial-cluster-state", "existing")
	var staleLog strings.Builder
	stale.Stdout, stale.Stderr = &staleLog, &staleLog
	if err := stale.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- stale.Wait() }()
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
		stale.Process.Kill()
		<-exited
	}
	if !strings.Contains(staleLog.String(), "removed") {
		t.Fatalf("the stale member should fail as removed; its log ends:\n%s", lastLines(staleLog.String(), 10))
	}

	// Without --fix, guard only reports, and says exactly what to do.
	endpoints := strings.Join(c.Endpoints(), ",")
	code, g, _ := runGuard(t, "--data-dir", volume, "--name", "m3", "--peer-urls", peer, "--endpoints", endpoints)
	if code != exitCritical || g.Verdict.Class != guard.Removed || len(g.Next) == 0 {
		t.Fatalf("guard without --fix: exit %d, %+v", code, g)
	}

	killLocalMember(t, volume)
	code, g, errOut := runGuard(t, "--data-dir", volume, "--name", "m3", "--peer-urls", peer, "--client-urls", client,
		"--endpoints", endpoints, "--fix", "--rejoin", "--start", "--etcd-command", etcdmedicEtcd(t))
	if code != exitOK || g.Quarantined == nil || g.Joined == nil || !g.Joined.Promoted {
		t.Fatalf("guard --fix --rejoin --start: exit %d, %+v\n%s", code, g, errOut)
	}
	if err := guard.Verify(g.Quarantined.Dir); err != nil {
		t.Fatalf("quarantine does not match its manifest: %v", err)
	}
	if _, err := os.Stat(filepath.Join(g.Quarantined.Dir, "data", "member", "wal")); err != nil {
		t.Fatalf("the old WAL is not in quarantine: %v", err)
	}

	// The cluster is whole again: three voters, healthy, and every acknowledged write is there.
	code, d := waitDoctor(t, c.Endpoints(), func(d doctorJSON) bool { return d.Quorum.Voters == 3 && d.Quorum.VotersUp == 3 && len(d.Findings) == 0 })
	if code != exitOK {
		t.Fatalf("doctor after rejoin: exit %d, %s", code, d.ids())
	}
	ledger.Stop()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	missing, err := etcdtest.MissingWrites(ctx, c.Client(t), ledger.Acked())
	if err != nil || len(missing) != 0 || len(ledger.Acked()) == 0 {
		t.Fatalf("%d of %d acknowledged writes missing (err %v)", len(missing), len(ledger.Acked()), err)
	}
	t.Logf("rejoined; %d acknowledged writes, none lost; quarantine %s", len(ledger.Acked()), g.Quarantined.Dir)
}

// A data dir from another cluster whose members have the same names. It is FOREIGN, and moved,
// only when the endpoints given are proven to be the cluster the member belongs to: their
// membership holds its peer URLs. Given another cluster's endpoints (or a member not added yet),
// it is UNKNOWN and nothing moves: those may be the wrong cluster's.
func TestGuardForeignDataDir(t *testing.T) {
	t.Parallel()
	c := etcdtest.NewCluster(t, etcdtest.ClusterSpec{Size: 3})
	other := etcdtest.NewCluster(t, etcdtest.ClusterSpec{Size: 1})
	om := other.Member("m1")
	if err := om.Stop(); err != nil {
		t.Fatal(err)
	}
	eps := strings.Join(c.Endpoints(), ",")
	// The volume of c's m1 holds the other cluster's m1: c knows m1 at these peer URLs.
	code, g, _ := runGuard(t, "--data-dir", om.DataDir, "--name", "m1", "--peer-urls", c.Member("m1").PeerURL, "--endpoints", eps)
	if code != exitCritical || g.Verdict.Class != guard.Foreign {
		t.Fatalf("exit %d, %+v", code, g.Verdict)
	}
	// A new member m4, not added yet: c may not be its cluster. Nothing moves, and guard says
	// to add it first or to give this cluster's endpoints.
	client, peer := newURLs(t)
	before := dirListing(t, om.DataDir)
	code, g, _ = runGuard(t, "--data-dir", om.DataDir, "--name", "m4", "--peer-urls", peer, "--client-urls", client, "--endpoints", eps, "--fix")
	if next := strings.Join(g.Next, " "); code != exitFailed || g.Verdict.Class != guard.Unknown || g.Quarantined != nil ||
		!strings.Contains(g.Verdict.Reason, "may be another cluster's") || !strings.Contains(next, "member add m4 --learner --peer-urls="+peer) {
		t.Fatalf("--fix, m4 not added: exit %d, %+v", code, g)
	}
	if after := dirListing(t, om.DataDir); after != before {
		t.Fatal("guard moved another cluster's data on endpoints not proven to be the member's cluster")
	}
	// Added (as guard said): --fix quarantines, and m4 may start on the emptied data dir.
	addLearner(t, c.Client(t), peer)
	code, g, _ = runGuard(t, "--data-dir", om.DataDir, "--name", "m4", "--peer-urls", peer, "--client-urls", client, "--endpoints", eps, "--fix")
	if code != exitOK || g.Verdict.Class != guard.Foreign || g.Quarantined == nil {
		t.Fatalf("--fix, m4 added: exit %d, %+v", code, g)
	}
	if err := guard.Verify(g.Quarantined.Dir); err != nil {
		t.Fatal(err)
	}
	// Now empty: safe to start, and guard says so.
	if code, g, _ = runGuard(t, "--data-dir", om.DataDir, "--endpoints", strings.Join(c.Endpoints(), ",")); code != exitOK || g.Verdict.Class != guard.Empty {
		t.Fatalf("after quarantine: exit %d, %+v", code, g.Verdict)
	}
}

// The review's case: a stopped member's own data dir, with the member's own name and peer
// URLs, but guard pointed at another cluster (another etcd on the same node answers on the
// endpoints given). UNKNOWN, exit 3, nothing moved: never FOREIGN, never quarantined.
func TestGuardGivenAnotherClustersEndpointsMovesNothing(t *testing.T) {
	t.Parallel()
	c := etcdtest.NewCluster(t, etcdtest.ClusterSpec{Size: 3})
	other := etcdtest.NewCluster(t, etcdtest.ClusterSpec{Size: 1})
	m2 := c.Member("m2")
	if err := m2.Stop(); err != nil {
		t.Fatal(err)
	}
	before := dirListing(t, m2.DataDir)
	code, g, errOut := runGuard(t, "--data-dir", m2.DataDir, "--name", "m2", "--peer-urls", m2.PeerURL, "--endpoints", other.Member("m1").ClientURL, "--fix")
	if code != exitFailed || g.Verdict.Class != guard.Unknown || g.Verdict.Movable || g.Quarantined != nil ||
		!strings.Contains(g.Verdict.Reason, "the endpoints probed ("+other.Member("m1").ClientURL) || !strings.Contains(g.Verdict.Reason, "Give this cluster's endpoints") {
		t.Fatalf("exit %d, %+v\n%s", code, g, errOut)
	}
	if after := dirListing(t, m2.DataDir); after != before {
		t.Fatal("guard changed the member's data dir")
	}
	// With its own cluster's endpoints it is VALID.
	eps := strings.Join([]string{c.Member("m1").ClientURL, c.Member("m3").ClientURL}, ",")
	if code, g, _ := runGuard(t, "--data-dir", m2.DataDir, "--name", "m2", "--peer-urls", m2.PeerURL, "--endpoints", eps); code != exitOK || g.Verdict.Class != guard.Valid {
		t.Fatalf("own endpoints: exit %d, %+v", code, g.Verdict)
	}
}

// A live member's data dir offered under another member's name and peer URLs; and the same
// data dir under its own: VALID.
func TestGuardMismatchedAndValid(t *testing.T) {
	t.Parallel()
	c := etcdtest.NewCluster(t, etcdtest.ClusterSpec{Size: 3})
	m2 := c.Member("m2")
	if err := m2.Stop(); err != nil {
		t.Fatal(err)
	}
	eps := strings.Join([]string{c.Member("m1").ClientURL, c.Member("m3").ClientURL}, ",")
	code, g, _ := runGuard(t, "--data-dir", m2.DataDir, "--name", "m3", "--peer-urls", c.Member("m3").PeerURL, "--endpoints", eps)
	if code != exitCritical || g.Verdict.Class != guard.Mismatched {
		t.Fatalf("mismatched: exit %d, %+v", code, g.Verdict)
	}
	code, g, _ = runGuard(t, "--data-dir", m2.DataDir, "--name", "m2", "--peer-urls", m2.PeerURL, "--endpoints", eps)
	if code != exitOK || g.Verdict.Class != guard.Valid {
		t.Fatalf("valid: exit %d, %+v", code, g.Verdict)
	}
}

// A PD data dir: the stale join file goes into quarantine with the rest.
func TestGuardPDDataDirWithJoinFile(t *testing.T) {
	t.Parallel()
	c := etcdtest.NewCluster(t, etcdtest.ClusterSpec{Size: 3})
	m3 := c.Member("m3")
	m3.Stop()
	pd := filepath.Join(t.TempDir(), "pd")
	copyDir(t, m3.DataDir, pd)
	writeFile(t, filepath.Join(pd, "join"), "m1="+c.Member("m1").PeerURL+",pd-4=http://127.0.0.1:1")
	c.RemoveMember(t, m3)
	_, peer := newURLs(t)
	code, g, _ := runGuard(t, "--data-dir", pd, "--name", "m3", "--peer-urls", peer, "--endpoints", strings.Join(c.Endpoints(), ","), "--fix")
	if code != exitCritical || g.Verdict.Class != guard.Removed || g.Quarantined == nil {
		t.Fatalf("exit %d, %+v", code, g)
	}
	if _, err := os.Stat(filepath.Join(pd, "join")); !os.IsNotExist(err) {
		t.Errorf("the join file is still in the data dir: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(g.Quarantined.Dir, "data", "join")); err != nil || !strings.Contains(string(b), "pd-4") {
		t.Errorf("the join file is not in quarantine: %v", err)
	}
}

// Without quorum, guard refuses to judge, and --fix touches nothing.
func TestGuardUnknownWithoutQuorum(t *testing.T) {
	t.Parallel()
	c := etcdtest.NewCluster(t, etcdtest.ClusterSpec{Size: 3})
	m3 := c.Member("m3")
	m3.Stop()
	before := dirListing(t, m3.DataDir)
	c.Member("m2").Kill()
	_, peer := newURLs(t)
	code, g, _ := runGuard(t, "--data-dir", m3.DataDir, "--name", "m3", "--peer-urls", peer, "--endpoints", strings.Join(c.Endpoints(), ","), "--fix")
	if code != exitFailed || g.Verdict.Class != guard.Unknown || g.Quarantined != nil || !strings.Contains(g.Verdict.Reason, "recover") {
		t.Fatalf("exit %d, %+v", code, g)
	}
	if after := dirListing(t, m3.DataDir); after != before {
		t.Fatalf("guard changed the data dir without quorum")
	}
}

// kubeadm reset on a master (incident 2, step 3): m2's data dir is emptied, but m2 stays in the
// membership. etcd started there panics ("tocommit(N) is out of range [lastIndex(0)]"), so
// guard says not safe, exit 2, names the replace command, and --fix --rejoin change nothing.
func TestGuardEmptyDataDirOfAMemberThatRanBefore(t *testing.T) {
	t.Parallel()
	c := etcdtest.NewCluster(t, etcdtest.ClusterSpec{Size: 3})
	m2 := c.Member("m2")
	if err := m2.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(m2.DataDir, m2.DataDir+".before-reset"); err != nil { // kept: nothing is lost
		t.Fatal(err)
	}
	eps := strings.Join([]string{c.Member("m1").ClientURL, c.Member("m3").ClientURL}, ",")
	for _, how := range []string{"missing", "empty"} {
		if how == "empty" {
			if err := os.Mkdir(m2.DataDir, 0o700); err != nil {
				t.Fatal(err)
			}
		}
		code, g, errOut := runGuard(t, "--data-dir", m2.DataDir, "--name", "m2", "--peer-urls", m2.PeerURL, "--endpoints", eps, "--fix", "--rejoin")
		if code != exitCritical || g.Verdict.Class != guard.Empty || g.Verdict.Safe || g.Quarantined != nil || g.Joined != nil ||
			!strings.Contains(g.Verdict.Reason, "ran before and its data is gone") || !strings.Contains(strings.Join(g.Next, " "), "etcdmedic member replace m2 --name m2 --peer-urls "+m2.PeerURL) {
			t.Fatalf("%s data dir: exit %d, %+v\n%s", how, code, g, errOut)
		}
	}
	if n := len(c.MemberList(t)); n != 3 {
		t.Errorf("%d members after guard, want the 3 it found", n)
	}
}

// A VM snapshot of m2 restored after the cluster moved on: m2's own data, rolled back. guard
// does not judge on the raft index (a member stopped normally is always behind), so it is
// VALID, exit 0; but the evidence shows the live index beside the data dir's, and the next
// step says what the panic of such a copy looks like and to replace the member then.
func TestGuardShowsARolledBackCopyBehindTheCluster(t *testing.T) {
	t.Parallel()
	c := etcdtest.NewCluster(t, etcdtest.ClusterSpec{Size: 3})
	m2 := c.Member("m2")
	if err := m2.Stop(); err != nil {
		t.Fatal(err)
	}
	snapshot := filepath.Join(t.TempDir(), "m2-snapshot")
	copyDir(t, m2.DataDir, snapshot)
	if err := m2.Start(); err != nil {
		t.Fatal(err)
	}
	cli := c.Client(t)
	for i := range 50 {
		if _, err := cli.Put(t.Context(), fmt.Sprintf("after-the-snapshot/%d", i), "v"); err != nil {
			t.Fatal(err)
		}
	}
	if err := m2.Stop(); err != nil {
		t.Fatal(err)
	}
	eps := strings.Join([]string{c.Member("m1").ClientURL, c.Member("m3").ClientURL}, ",")
	code, g, errOut := runGuard(t, "--data-dir", snapshot, "--name", "m2", "--peer-urls", m2.PeerURL, "--endpoints", eps)
	if code != exitOK || g.Verdict.Class != guard.Valid {
		t.Fatalf("exit %d, %+v\n%s", code, g, errOut)
	}
	seen := map[string]string{}
	for _, e := range g.Verdict.Evidence {
		seen[e.What] = e.Value
	}
	var dataIndex, liveIndex, term uint64
	fmt.Sscanf(seen["data dir last raft index (term)"], "%d (%d)", &dataIndex, &term)
	fmt.Sscanf(seen["live raft index (term)"], "%d (%d)", &liveIndex, &term)
	if dataIndex == 0 || liveIndex < dataIndex+50 {
		t.Errorf("evidence: data dir at %d, live at %d: want the live index 50 writes ahead (%v)", dataIndex, liveIndex, seen)
	}
	if next := strings.Join(g.Next, " "); !strings.Contains(next, "tocommit(N) is out of range") || !strings.Contains(next, "member replace m2") {
		t.Errorf("next: %s", next)
	}
}

func dirListing(t *testing.T, dir string) string {
	var b strings.Builder
	filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err == nil {
			fmt.Fprintf(&b, "%s %d %d\n", p, info.Size(), info.ModTime().UnixNano())
		}
		return nil
	})
	return b.String()
}

func TestGuardEmptyAndMissingDirsAreSafe(t *testing.T) {
	t.Parallel()
	c := etcdtest.NewCluster(t, etcdtest.ClusterSpec{Size: 1})
	empty := t.TempDir()
	os.Mkdir(filepath.Join(empty, "lost+found"), 0o700) // a fresh volume
	for _, dir := range []string{empty, filepath.Join(t.TempDir(), "not-yet")} {
		if code, g, _ := runGuard(t, "--data-dir", dir, "--endpoints", c.Member("m1").ClientURL); code != exitOK || g.Verdict.Class != guard.Empty {
			t.Errorf("%s: exit %d, %+v", dir, code, g.Verdict)
		}
	}
	// With the member's peer URLs: safe only once it has been added, or etcd would bootstrap
	// a cluster of its own.
	_, peer := newURLs(t)
	if code, g, _ := runGuard(t, "--data-dir", empty, "--name", "m2", "--peer-urls", peer, "--endpoints", c.Member("m1").ClientURL); code != exitCritical || g.Verdict.Safe {
		t.Errorf("empty, member not added: exit %d, %+v", code, g.Verdict)
	} else if next := strings.Join(g.Next, " "); !strings.Contains(next, "member add m2 --learner --peer-urls="+peer) || strings.Contains(next, "--fix") {
		t.Errorf("empty, member not added: the next step is member add, never --fix (it moves nothing): %v", g.Next)
	}
	// The help says the same as the exit code: 2, and member add first.
	if _, help, _ := runCLI(t, "guard", "--help"); !strings.Contains(help, "for an EMPTY data dir whose member is not\nadded yet, member add first") || strings.Contains(help, "2 not safe (run again with --fix)") {
		t.Errorf("guard --help on exit 2:\n%s", help)
	}
	if _, err := c.Client(t).MemberAddAsLearner(t.Context(), []string{peer}); err != nil {
		t.Fatal(err)
	}
	if code, g, _ := runGuard(t, "--data-dir", empty, "--name", "m2", "--peer-urls", peer, "--endpoints", c.Member("m1").ClientURL); code != exitOK || !g.Verdict.Safe {
		t.Errorf("empty, member added: exit %d, %+v", code, g.Verdict)
	}
	// A directory of other things, and a bare db file: never moved, even with --fix.
	other := t.TempDir()
	writeFile(t, filepath.Join(other, "important.txt"), "not etcd")
	if code, g, _ := runGuard(t, "--data-dir", other, "--endpoints", c.Member("m1").ClientURL, "--fix"); code != exitCritical || g.Quarantined != nil || g.Verdict.Movable {
		t.Errorf("non-etcd dir: exit %d, %+v", code, g)
	}
	if _, err := os.Stat(filepath.Join(other, "important.txt")); err != nil {
		t.Fatalf("guard moved a file that is not etcd's: %v", err)
	}
}

// The first start of a new cluster with guard before every member (ExecStartPre=, an init
// container): nothing answers yet. A member that says it bootstraps (--initial-cluster-state
// new, given or read from its config) may start; one that says nothing is not judged (it may
// be a wiped member of a cluster out of reach).
func TestGuardLetsANewClusterForm(t *testing.T) {
	t.Parallel()
	empty := t.TempDir()
	client, peer := newURLs(t)
	member := []string{"--data-dir", empty, "--name", "m1", "--peer-urls", peer, "--endpoints", client}
	if code, g, _ := runGuard(t, append(member, "--initial-cluster-state", "new")...); code != exitOK || g.Verdict.Class != guard.Empty || len(g.Next) > 0 {
		t.Errorf("bootstrapping: exit %d, %+v, next %v", code, g.Verdict, g.Next)
	}
	if code, g, _ := runGuard(t, member...); code != exitFailed || g.Verdict.Class != guard.Unknown || !strings.Contains(strings.Join(g.Next, " "), "--initial-cluster-state new") {
		t.Errorf("not said: exit %d, %+v, next %v", code, g.Verdict, g.Next)
	}
	config := filepath.Join(t.TempDir(), "etcd.conf.yml")
	writeFile(t, config, fmt.Sprintf("name: m1\ndata-dir: %s\ninitial-advertise-peer-urls: %s\nadvertise-client-urls: %s\n", empty, peer, client))
	if code, g, _ := runGuard(t, "--from-config", config, "--endpoints", client); code != exitOK || g.Verdict.Class != guard.Empty {
		t.Errorf("a config file that leaves etcd's default (new): exit %d, %+v", code, g.Verdict)
	}
	writeFile(t, config, fmt.Sprintf("name: m1\ndata-dir: %s\ninitial-advertise-peer-urls: %s\ninitial-cluster-state: existing\n", empty, peer))
	if code, g, _ := runGuard(t, "--from-config", config, "--endpoints", client); code != exitFailed || g.Verdict.Class != guard.Unknown {
		t.Errorf("a config file joining an existing cluster: exit %d, %+v", code, g.Verdict)
	}
	if code, _, errOut := runGuard(t, append(member, "--initial-cluster-state", "old")...); code != exitFailed || !strings.Contains(errOut, "want new or existing") {
		t.Errorf("--initial-cluster-state old: exit %d, %s", code, errOut)
	}
}
