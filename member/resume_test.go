package member

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/etcdmedic/etcdmedic"

	"github.com/etcdmedic/etcdmedic/internal/etcdtest"
	"github.com/etcdmedic/etcdmedic/runtime/local"
)

// A replace interrupted after it started m4 as a learner, before the promotion (a SIGINT, a
// SIGKILL, or the catch-up timeout, after which it says "run the same command again"): m3 is
// gone and m4's etcd runs on its data dir. The same command run again used to refuse that data
// dir ("give an empty or stale data dir"; emptying it would have started a second etcd with
// m4's ID). Now it goes on from the learner: promoted, the same member, its data dir as it was,
// the same etcd process, no second one.
func TestReplaceFinishesAfterItsLearnerStarted(t *testing.T) {
	c := etcdtest.NewCluster(t, etcdtest.ClusterSpec{Size: 3})
	m3 := c.Member("m3")
	m3.Kill()
	c.Leader(t) // m3 may have led: the others elect a leader first, as long before an operator acts
	backups := t.TempDir()
	spec := newMemberSpec(t, "m4")

	ctx, interrupt := context.WithCancel(t.Context())
	res, err := replacer(t, c, backups, &interruptAt{line: "wait until m4 has caught up", interrupt: interrupt}).Replace(ctx, "m3", spec)
	if err == nil || errors.Is(err, ErrRefused) || res == nil || res.Joined == nil || res.Joined.Promoted {
		t.Fatalf("the interrupted run: %+v, error %v", res, err)
	}
	learner := res.Joined.MemberID
	pid := waitLearnerRunning(t, c, spec, learner)

	res, err = replacer(t, c, backups, nil).Replace(t.Context(), "m3", spec)
	if err != nil || res.RemovedID != etcdmedic.NoID || res.Joined == nil || !res.Joined.Promoted {
		t.Fatalf("the run again: %+v, error %v", res, err)
	}
	if res.Joined.MemberID != learner {
		t.Errorf("the run again finished member %s, not the learner %s the first run started", res.Joined.MemberID, learner)
	}
	assertReplaced(t, c, spec, m3.ID)
	assertKeptRunning(t, spec, learner, pid, res)
}

// The same for member add, with the learner's etcd gone before the rerun (the host rebooted):
// given the data dir of another member (m3's, stopped meanwhile) by mistake, the rerun still
// refuses it and changes nothing; given the learner's own, it starts the learner there and
// promotes it.
func TestAddFinishesAfterItsLearnerStarted(t *testing.T) {
	c := etcdtest.NewCluster(t, etcdtest.ClusterSpec{Size: 3})
	m3 := c.Member("m3")
	spec := newMemberSpec(t, "m4")
	add := func(ctx context.Context, spec JoinSpec, out *interruptAt) (*Replaced, error) {
		r := replacer(t, c, t.TempDir(), out)
		return Add(ctx, AddOptions{Conn: r.Conn, Joiner: r.Joiner, Spec: spec, Out: r.Out})
	}

	ctx, interrupt := context.WithCancel(t.Context())
	res, err := add(ctx, spec, &interruptAt{line: "wait until m4 has caught up", interrupt: interrupt})
	if err == nil || errors.Is(err, ErrRefused) || res == nil || res.Joined == nil || res.Joined.Promoted {
		t.Fatalf("the interrupted run: %+v, error %v", res, err)
	}
	learner := res.Joined.MemberID
	pid := waitLearnerRunning(t, c, spec, learner)
	syscall.Kill(pid, syscall.SIGKILL)
	waitFor(t, "the learner's etcd to exit", func() bool { return !runsOn(spec) })
	m3.Kill()   // its data dir can be read offline; etcd refuses an add with a voter down, not a refusal of ours
	c.Leader(t) // m3 may have led: the others elect a leader first, as long before an operator acts
	before := memberIDs(c.MemberList(t))

	wrong := spec
	wrong.DataDir = m3.DataDir
	if _, err := add(t.Context(), wrong, nil); !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "give an empty or stale data dir") {
		t.Fatalf("the data dir of m3 given for m4: error %v, want a refusal", err)
	}
	if id, err := dataDirIdentity(m3.DataDir, ""); err != nil || id == nil || uint64(id.MemberID) != m3.ID {
		t.Fatalf("m3's data dir after the refusal: %+v, %v", id, err)
	}
	if after := memberIDs(c.MemberList(t)); !slices.Equal(after, before) || runsOn(wrong) {
		t.Fatalf("the refused run changed something: members %v (were %v), an etcd runs on m3's data dir: %v", after, before, runsOn(wrong))
	}

	if err := m3.Start(); err != nil {
		t.Fatal(err)
	}
	if err := m3.WaitReady(t.Context()); err != nil {
		t.Fatal(err)
	}
	res, err = add(t.Context(), spec, nil)
	if err != nil || res.Joined == nil || !res.Joined.Promoted || res.Joined.MemberID != learner || res.Quarantined != nil {
		t.Fatalf("the run again: %+v, error %v", res, err)
	}
	if id, err := dataDirIdentity(spec.DataDir, ""); err != nil || id == nil || id.MemberID != learner {
		t.Fatalf("m4's data dir after the run again holds %+v (%v), want member %s", id, err, learner)
	}
	for _, m := range c.MemberList(t) {
		if etcdmedic.ID(m.ID) == learner && (m.IsLearner || m.Name != "m4") {
			t.Fatalf("m4 after the run again: %+v, want a voter named m4", m)
		}
	}
}

// waitLearnerRunning waits until the learner id the interrupted run started has published its
// name and its etcd holds its data dir (its WAL written), and returns that etcd's pid.
func waitLearnerRunning(t *testing.T, c *etcdtest.Cluster, spec JoinSpec, id etcdmedic.ID) int {
	t.Helper()
	waitFor(t, "the learner to start", func() bool {
		for _, m := range c.MemberList(t) {
			if etcdmedic.ID(m.ID) == id && m.IsLearner && m.Name == spec.Name {
				return runsOn(spec)
			}
		}
		return false
	})
	pid, _, ok := local.FindProcess(spec.DataDir)
	if !ok {
		t.Fatalf("no etcd runs on %s", spec.DataDir)
	}
	return pid
}

// assertKeptRunning checks that the rerun kept the learner's data dir and process: not
// quarantined, still the learner's, the same etcd on it, never started again.
func assertKeptRunning(t *testing.T, spec JoinSpec, learner etcdmedic.ID, pid int, res *Replaced) {
	t.Helper()
	if res.Quarantined != nil {
		t.Errorf("the learner's data dir was quarantined: %+v", res.Quarantined)
	}
	if id, err := dataDirIdentity(spec.DataDir, ""); err != nil || id == nil || id.MemberID != learner {
		t.Errorf("the learner's data dir now holds %+v (%v), want member %s", id, err, learner)
	}
	if now, _, ok := local.FindProcess(spec.DataDir); !ok || now != pid {
		t.Errorf("the etcd on %s is pid %d (running: %v), was %d: it was started again", spec.DataDir, now, ok, pid)
	}
	if b, _ := os.ReadFile(local.PIDFile(spec.DataDir)); strings.TrimSpace(string(b)) != strconv.Itoa(pid) {
		t.Errorf("the pid file says %q, the learner ran as %d: another etcd was started", b, pid)
	}
	ents, _ := os.ReadDir(filepath.Dir(spec.DataDir))
	for _, e := range ents {
		if base := filepath.Base(spec.DataDir); e.Name() != base && e.Name() != base+".log" && e.Name() != base+".pid" {
			t.Errorf("%s beside the learner's data dir: moved aside?", e.Name())
		}
	}
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("waited a minute for %s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
