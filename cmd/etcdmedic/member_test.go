package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/etcdmedic/etcdmedic"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdmedic/etcdmedic/internal/etcdtest"
	"github.com/etcdmedic/etcdmedic/member"
)

// Replacing a dead member the safe way, under write load: nothing acknowledged is lost, the
// snapshot taken first matches its checksum, and the cluster ends with three healthy voters.
func TestMemberReplaceUnderLoad(t *testing.T) {
	t.Parallel()
	c := etcdtest.NewCluster(t, etcdtest.ClusterSpec{Size: 3})
	ledger := etcdtest.StartLoad(t.Context(), t, c.Client(t), etcdtest.LoadSpec{Rate: 50})
	waitAcked(t, ledger, 20)
	c.Member("m3").Kill()
	eps := strings.Join([]string{c.Member("m1").ClientURL, c.Member("m2").ClientURL}, ",")
	client, peer := newURLs(t)
	dataDir := filepath.Join(t.TempDir(), "m4.etcd")
	backups := filepath.Join(t.TempDir(), "backups")

	// --dry-run: the plan, and nothing changes.
	code, out, errOut := runCLI(t, "member", "replace", "m3", "--name", "m4", "--peer-urls", peer, "--endpoints", eps, "--dry-run")
	if code != exitOK || !strings.Contains(out, "member remove") || !strings.Contains(out, "--learner") {
		t.Fatalf("dry run: exit %d\n%s%s", code, out, errOut)
	}
	if n := len(c.MemberList(t)); n != 3 {
		t.Fatalf("dry run changed the membership: %d members", n)
	}

	killLocalMember(t, dataDir)
	code, out, errOut = runCLI(t, "member", "replace", "m3", "--name", "m4", "--peer-urls", peer, "--client-urls", client,
		"--data-dir", dataDir, "--backup-dir", backups, "--start", "--etcd-command", etcdmedicEtcd(t), "--endpoints", eps, "-w", "json")
	if code != exitOK {
		t.Fatalf("replace: exit %d\n%s\n%s", code, out, errOut)
	}
	var res member.Replaced
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	if res.Backup == nil || res.Joined == nil || !res.Joined.Promoted || res.RemovedID == etcdmedic.NoID {
		t.Fatalf("replace result: %+v", res)
	}
	b, err := os.ReadFile(res.Backup.Path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	if hex.EncodeToString(sum[:]) != res.Backup.SHA256 || res.Backup.Revision == 0 {
		t.Fatalf("backup checksum mismatch or empty: %+v", res.Backup)
	}
	if !strings.Contains(errOut, "==> step 1/") {
		t.Errorf("each step is printed before it runs; stderr:\n%s", errOut)
	}
	code, d := waitDoctor(t, []string{c.Member("m1").ClientURL}, func(d doctorJSON) bool {
		return d.Quorum.Voters == 3 && d.Quorum.VotersUp == 3 && len(d.Findings) == 0
	})
	if code != exitOK {
		t.Fatalf("doctor after replace: exit %d %s", code, d.ids())
	}
	ledger.Stop()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	missing, err := etcdtest.MissingWrites(ctx, c.Client(t), ledger.Acked())
	if err != nil || len(missing) != 0 || len(ledger.Acked()) == 0 {
		t.Fatalf("%d of %d acknowledged writes missing (%v)", len(missing), len(ledger.Acked()), err)
	}
}

// The guards: each refusal changes nothing and says why.
func TestMemberChangesRefusedWhenUnsafe(t *testing.T) {
	t.Parallel()
	c := etcdtest.NewCluster(t, etcdtest.ClusterSpec{Size: 3})
	c.Member("m2").Kill()
	eps := strings.Join(c.Endpoints(), ",")
	_, peer := newURLs(t)
	// m1 is up: removing it leaves m3 alone of two voters.
	code, _, errOut := runCLI(t, "member", "replace", "m1", "--name", "m4", "--peer-urls", peer, "--endpoints", eps, "--backup-dir", t.TempDir(), "--command-timeout", "2s")
	if code != exitCritical || !strings.Contains(errOut, "would leave 1 of 2 voters up") {
		t.Fatalf("replace an up member with one down: exit %d: %s", code, errOut)
	}
	code, _, errOut = runCLI(t, "member", "remove", "m3", "--endpoints", eps, "--command-timeout", "2s")
	if code != exitCritical || !strings.Contains(errOut, "refused") {
		t.Fatalf("remove: exit %d: %s", code, errOut)
	}
	// m2 is down: removing it leaves m1 and m3, both up. --dry-run says what it would run.
	code, out, errOut := runCLI(t, "member", "remove", "m2", "--dry-run", "--endpoints", eps, "--command-timeout", "2s", "-w", "json")
	var removed member.Removed
	if code != exitOK || json.Unmarshal([]byte(out), &removed) != nil || !removed.DryRun || removed.Member.Name != "m2" || removed.Command != "etcdctl member remove "+removed.Member.ID.String() {
		t.Fatalf("remove --dry-run: exit %d, %+v\n%s%s", code, removed, out, errOut)
	}
	if n := len(c.MemberList(t)); n != 3 {
		t.Fatalf("a refused change changed the membership: %d members", n)
	}
	code, out, errOut = runCLI(t, "member", "remove", "m2", "--endpoints", eps, "--command-timeout", "2s", "-w", "json")
	removed = member.Removed{}
	if code != exitOK || json.Unmarshal([]byte(out), &removed) != nil || removed.DryRun || removed.Member.Name != "m2" || len(removed.Next) == 0 {
		t.Fatalf("remove: exit %d, %+v\n%s%s", code, removed, out, errOut)
	}
	if n := len(c.MemberList(t)); n != 2 {
		t.Fatalf("after removing m2: %d members", n)
	}
}

func TestMemberAddRefusedWhileALearnerIsPending(t *testing.T) {
	t.Parallel()
	c := etcdtest.NewCluster(t, etcdtest.ClusterSpec{Size: 1, ExtraFlags: []string{"--max-learners=2"}})
	c.AddMember(t, "l1", etcdtest.AddOptions{Learner: true})
	_, peer := newURLs(t)
	code, _, errOut := runCLI(t, "member", "add", "--name", "l2", "--peer-urls", peer, "--endpoints", strings.Join(c.Endpoints(), ","))
	if code != exitCritical || !strings.Contains(errOut, "still pending") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	// promote clears it, and then the add goes through (printing how to start the member).
	code, out, errOut := runCLI(t, "member", "promote", "l1", "--endpoints", strings.Join(c.Endpoints(), ","), "-w", "json")
	if code != exitOK {
		t.Fatalf("promote: exit %d %s %s", code, out, errOut)
	}
	var promoted member.Promoted
	if err := json.Unmarshal([]byte(out), &promoted); err != nil || promoted.Member.Name != "l1" || promoted.Member.IsLearner {
		t.Fatalf("promote -w json: %+v (%v)\n%s", promoted, err, out)
	}
	// A second promote is refused: l1 is a voter now.
	if code, _, errOut := runCLI(t, "member", "promote", "l1", "--endpoints", strings.Join(c.Endpoints(), ",")); code != exitCritical || !strings.Contains(errOut, "voter already") {
		t.Fatalf("promote a voter: exit %d %s", code, errOut)
	}
	code, out, errOut = runCLI(t, "member", "add", "--name", "l2", "--peer-urls", peer, "--endpoints", c.Member("m1").ClientURL)
	if code != exitOK || !strings.Contains(out, "--initial-cluster-state existing") {
		t.Fatalf("add: exit %d\n%s%s", code, out, errOut)
	}
}

// waitAcked waits (at most a minute: after a kill that may include an election and the
// clients' failover, on a loaded machine) until the ledger has n acknowledged writes: the load
// is really on.
func waitAcked(t *testing.T, l *etcdtest.Ledger, n int) {
	t.Helper()
	for i := 0; i < 1200 && len(l.Acked()) < n; i++ {
		time.Sleep(50 * time.Millisecond)
	}
	if len(l.Acked()) < n {
		t.Fatalf("the write load got only %d writes acknowledged in a minute", len(l.Acked()))
	}
}

// nothingLost asserts that every write the ledger saw acknowledged is in the cluster at eps
// (members the harness may no longer run: recovery and upgrades restart them themselves).
func nothingLost(t *testing.T, eps []string, ledger *etcdtest.Ledger) {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	missing, err := etcdtest.MissingWrites(t.Context(), cli, ledger.Acked())
	if err != nil || len(missing) != 0 || len(ledger.Acked()) == 0 {
		t.Fatalf("%d of %d acknowledged writes lost (%v)", len(missing), len(ledger.Acked()), err)
	}
}
