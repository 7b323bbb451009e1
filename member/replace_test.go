package member

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/etcdmedic/etcdmedic"

	"go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/etcdmedic/etcdmedic/cluster"
	"github.com/etcdmedic/etcdmedic/internal/etcdtest"
	"github.com/etcdmedic/etcdmedic/internal/freeport"
	"github.com/etcdmedic/etcdmedic/runtime/local"
)

// m3 is retired to new hardware, and OLD is mistyped: the real run refuses it as the dry run
// does, names the members there are, and changes nothing (no snapshot, no member added). It
// used to add the new member and succeed, leaving m3 in place.
func TestReplaceRefusesAnOldMemberThatIsNotThere(t *testing.T) {
	c := etcdtest.NewCluster(t, etcdtest.ClusterSpec{Size: 3})
	before := memberIDs(c.MemberList(t))
	backups := t.TempDir()
	spec := newMemberSpec(t, "m4")
	for _, dryRun := range []bool{true, false} {
		r := replacer(t, c, backups, nil)
		r.DryRun = dryRun
		_, err := r.Replace(t.Context(), "m3-typo", spec)
		if !errors.Is(err, ErrNoSuchMember) || !errors.Is(err, ErrRefused) {
			t.Fatalf("dry run %v: error %v, want a refusal for a member that is not there", dryRun, err)
		}
		for _, name := range []string{"m1", "m2", "m3"} {
			if !strings.Contains(err.Error(), name+" (") {
				t.Errorf("the refusal does not name %s: %v", name, err)
			}
		}
	}
	if after := memberIDs(c.MemberList(t)); !slices.Equal(after, before) {
		t.Fatalf("the membership changed: %v, was %v", after, before)
	}
	if ents, _ := os.ReadDir(backups); len(ents) != 0 {
		t.Errorf("a refused replace wrote into the backup dir: %v", ents)
	}
}

// NEW's peer URL copy-pasted from a live member: refused before the snapshot and the remove,
// naming the member that holds it. It used to remove OLD, then fail the add on every rerun,
// leaving the cluster a member short.
func TestReplaceRefusesPeerURLsOfAnotherMember(t *testing.T) {
	c := etcdtest.NewCluster(t, etcdtest.ClusterSpec{Size: 3})
	c.Member("m3").Kill()
	before := memberIDs(c.MemberList(t))
	backups := t.TempDir()
	spec := newMemberSpec(t, "m4")
	spec.PeerURLs = []string{c.Member("m2").PeerURL}
	_, err := replacer(t, c, backups, nil).Replace(t.Context(), "m3", spec)
	var taken *PeerURLsTakenError
	if !errors.As(err, &taken) || !errors.Is(err, ErrRefused) {
		t.Fatalf("error %v, want a PeerURLsTakenError", err)
	}
	if uint64(taken.Holder.ID) != c.Member("m2").ID || !strings.Contains(err.Error(), "m2 (") {
		t.Fatalf("the refusal names %s, not m2: %v", taken.Holder.Label(), err)
	}
	if after := memberIDs(c.MemberList(t)); !slices.Equal(after, before) {
		t.Fatalf("the membership changed: %v, was %v (nothing may be removed or added)", after, before)
	}
	if ents, _ := os.ReadDir(backups); len(ents) != 0 {
		t.Errorf("a refused replace wrote into the backup dir: %v", ents)
	}
}

// A replace interrupted between the remove and the add (SIGINT, a lost connection): m3 is
// gone and m4 not added yet. The same command run again finds the record the first run left
// in the backup dir, and finishes: m4 added, started, promoted.
func TestReplaceResumesAfterItRemovedTheOldMember(t *testing.T) {
	c := etcdtest.NewCluster(t, etcdtest.ClusterSpec{Size: 3})
	m3 := c.Member("m3")
	m3.Kill()
	c.Leader(t) // m3 may have led: the others elect a leader first, as long before an operator acts
	backups := t.TempDir()
	spec := newMemberSpec(t, "m4")

	ctx, interrupt := context.WithCancel(t.Context())
	r := replacer(t, c, backups, &interruptAt{line: "etcdctl member add", interrupt: interrupt})
	res, err := r.Replace(ctx, "m3", spec)
	if err == nil || errors.Is(err, ErrRefused) || res == nil || uint64(res.RemovedID) != m3.ID {
		t.Fatalf("the interrupted run: %+v, error %v", res, err)
	}
	if ms := c.MemberList(t); len(ms) != 2 || slices.Contains(memberIDs(ms), m3.ID) {
		t.Fatalf("after the interrupted run: members %v, want m1 and m2", memberIDs(ms))
	}

	res, err = replacer(t, c, backups, nil).Replace(t.Context(), "m3", spec)
	if err != nil || res.RemovedID != etcdmedic.NoID || res.Joined == nil || !res.Joined.Promoted {
		t.Fatalf("the run again: %+v, error %v", res, err)
	}
	assertReplaced(t, c, spec, m3.ID)
}

// A replace killed after the add, before it started the learner: m3 is gone and m4 is an
// unstarted learner. The same command run again, with no record of the first run at hand
// (another backup dir), takes m4's learner as the evidence and finishes.
func TestReplaceResumesFromTheLearnerItAdded(t *testing.T) {
	c := etcdtest.NewCluster(t, etcdtest.ClusterSpec{Size: 3})
	m3 := c.Member("m3")
	m3.Kill()
	c.Leader(t) // m3 may have led: the others elect a leader first, as long before an operator acts
	spec := newMemberSpec(t, "m4")
	cli := c.Client(t)
	// What the first run did before it was killed.
	if err := Remove(t.Context(), cli, etcdmedic.ID(m3.ID)); err != nil {
		t.Fatal(err)
	}
	if _, err := retryUnhealthy(t.Context(), func(ctx context.Context) (any, error) {
		return cli.MemberAddAsLearner(ctx, spec.PeerURLs)
	}); err != nil {
		t.Fatal(err)
	}

	res, err := replacer(t, c, t.TempDir(), nil).Replace(t.Context(), "m3", spec)
	if err != nil || res.RemovedID != etcdmedic.NoID || res.Joined == nil || !res.Joined.Promoted {
		t.Fatalf("the run again: %+v, error %v", res, err)
	}
	assertReplaced(t, c, spec, m3.ID)
}

// replacer replaces members of c through its running members, starting the new one as a local
// process; the joiner's progress also goes to joinOut when given.
func replacer(t *testing.T, c *etcdtest.Cluster, backups string, joinOut *interruptAt) *Replacer {
	t.Helper()
	bin := etcdtest.Binary(t, etcdtest.Linked)
	var log bytes.Buffer
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("replace progress:\n%s", log.String())
		}
	})
	cli := c.Client(t)
	j := &Joiner{Client: cli, Runtime: local.Runtime{Command: append([]string{bin.Path}, bin.PrefixArgs...)}, Out: &log}
	if joinOut != nil {
		joinOut.log = &log
		j.Out = joinOut
	}
	conn := cluster.Conn{Endpoints: c.Endpoints(), DialTimeout: 2 * time.Second, CommandTimeout: 5 * time.Second}
	return &Replacer{Conn: conn, Client: cli, Joiner: j, Out: &log, BackupDir: backups}
}

// interruptAt interrupts the run (cancels its context) when a progress line says line: the
// moment a SIGINT would land.
type interruptAt struct {
	line      string
	interrupt context.CancelFunc
	log       *bytes.Buffer
}

func (w *interruptAt) Write(p []byte) (int, error) {
	if strings.Contains(string(p), w.line) {
		w.interrupt()
	}
	return w.log.Write(p)
}

// newMemberSpec is a new member on free ports, its data dir in the test's temp dir; its
// process is killed when the test ends.
func newMemberSpec(t *testing.T, name string) JoinSpec {
	t.Helper()
	ports, err := freeport.Ports(2)
	if err != nil {
		t.Fatal(err)
	}
	dataDir := filepath.Join(t.TempDir(), name+".etcd")
	t.Cleanup(func() {
		if b, err := os.ReadFile(local.PIDFile(dataDir)); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	return JoinSpec{Name: name, DataDir: dataDir,
		ClientURLs: []string{fmt.Sprintf("http://127.0.0.1:%d", ports[0])}, PeerURLs: []string{fmt.Sprintf("http://127.0.0.1:%d", ports[1])}}
}

// assertReplaced checks that old is gone and the cluster has three voters, spec's among them.
func assertReplaced(t *testing.T, c *etcdtest.Cluster, spec JoinSpec, old uint64) {
	t.Helper()
	ms := c.MemberList(t)
	var voters []string
	for _, m := range ms {
		if m.ID == old {
			t.Errorf("%x, the replaced member, is still a member", old)
		}
		if !m.IsLearner {
			voters = append(voters, m.Name)
		}
	}
	slices.Sort(voters)
	if !slices.Equal(voters, []string{"m1", "m2", spec.Name}) {
		t.Fatalf("voters %v, want m1, m2 and %s", voters, spec.Name)
	}
}

func memberIDs(ms []*etcdserverpb.Member) []uint64 {
	var ids []uint64
	for _, m := range ms {
		ids = append(ids, m.ID)
	}
	slices.Sort(ids)
	return ids
}
