package upgrade

import (
	"context"
	"errors"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/etcdmedic/etcdmedic/cluster"
	"github.com/etcdmedic/etcdmedic/finding"
	"github.com/etcdmedic/etcdmedic/internal/etcdtest"
	"github.com/etcdmedic/etcdmedic/plan"
	"github.com/etcdmedic/etcdmedic/runtime/local"
)

// journaled is a plan of two members in dir, whose journal already holds events.
func journaled(t *testing.T, record func(j *plan.Journal, at time.Time)) (*Applier, *[]Event) {
	t.Helper()
	dir := t.TempDir()
	j, err := plan.OpenJournal(dir)
	if err != nil {
		t.Fatal(err)
	}
	record(j, time.Date(2026, 12, 1, 3, 0, 0, 0, time.UTC))
	p := &Plan{Version: 1, From: "v3.5.24", Target: "v3.6.16",
		Members: []Member{{Name: "m1", DataDir: t.TempDir()}, {Name: "m2", DataDir: t.TempDir()}},
		Steps:   []plan.Step{plan.NewStep(StepSnapshot, "", "snapshot the cluster"), hopStep(0, "m1", "restart m1"), hopStep(0, "m2", "restart m2")},
		Check:   &Report{Verdict: "SAFE", Findings: []finding.Finding{}}}
	var events []Event
	return &Applier{Plan: p, Dir: dir, Progress: func(e Event) { events = append(events, e) }}, &events
}

func kinds(events []Event) []EventKind {
	var out []EventKind
	for _, e := range events {
		out = append(out, e.Kind)
	}
	return out
}

// Run again on a plan whose every step is done, apply changes nothing and says so, step by step.
func TestApplyOfAFinishedPlanSkipsEveryStep(t *testing.T) {
	a, events := journaled(t, func(j *plan.Journal, at time.Time) {
		for _, s := range []string{"snapshot", hopStepID(0, "m1"), hopStepID(0, "m2")} {
			j.Record(s, plan.Started, "", at)
			j.Record(s, plan.Finished, "1s", at)
		}
	})
	res, err := a.Apply(t.Context())
	if err != nil || !res.Upgraded || res.Target != "v3.6.16" || len(res.Timings) != 3 || !res.Timings[2].Skipped {
		t.Fatalf("%+v, %v", res, err)
	}
	if got := kinds(*events); !slices.Equal(got, []EventKind{StepSkipped, StepSkipped, StepSkipped}) || (*events)[2].Member != "m2" {
		t.Fatalf("events %+v", *events)
	}
}

// A step the journal shows started but not done is announced as resumed, with its member; a
// step that fails is reported as failed, and the run's result says nothing was upgraded.
func TestApplyReportsAResumedStepAndItsFailure(t *testing.T) {
	a, events := journaled(t, func(j *plan.Journal, at time.Time) {
		j.Record("snapshot", plan.Started, "", at)
		j.Record("snapshot", plan.Finished, "1s", at)
		j.Record(hopStepID(0, "m1"), plan.Started, "", at) // the power went here
	})
	// The plan has no hop 0: the step fails before it touches anything.
	res, err := a.Apply(t.Context())
	if err == nil || res.Upgraded || len(res.Timings) != 1 || !res.Timings[0].Skipped {
		t.Fatalf("%+v, %v", res, err)
	}
	want := []EventKind{StepSkipped, StepStarted, StepFailed}
	if got := kinds(*events); !slices.Equal(got, want) {
		t.Fatalf("events %v, want %v", got, want)
	}
	started := (*events)[1]
	if started.Member != "m1" || started.Step != "hop0:m1" || started.Message != "[2/3] restart m1 (resuming: it was interrupted)" {
		t.Errorf("step started: %+v", started)
	}
}

// restartPlan is the plan, made by Prepare from the live cluster c (v3.5.24), that restarts
// every member once on v3.5.24: followers first, the leader last.
func restartPlan(t *testing.T, c *etcdtest.Cluster) *Plan {
	t.Helper()
	var dirs []DataDir
	for _, m := range c.Members() {
		dirs = append(dirs, DataDir{Name: m.Name, DataDir: m.DataDir})
		killWhatApplyStarts(t, m.DataDir)
	}
	target, err := ParseVersion(etcdtest.V3_5_24)
	if err != nil {
		t.Fatal(err)
	}
	p, err := Prepare(t.Context(), PrepareOptions{Conn: cluster.Conn{}.To(c.Endpoints()), Target: target, DataDirs: dirs,
		Binaries: map[string]string{etcdtest.V3_5_24: etcdtest.Binary(t, etcdtest.V3_5_24).Path}, BackupDir: t.TempDir(), Now: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// killWhatApplyStarts kills, when the test ends, the member apply restarted as its own process
// on dataDir (the harness kills only the processes it started).
func killWhatApplyStarts(t *testing.T, dataDir string) {
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

// pidOn is the pid of the etcd running on m's data dir (0: none).
func pidOn(m *etcdtest.Member) int {
	pid, _, ok := local.FindProcess(m.DataDir)
	if !ok {
		return 0
	}
	return pid
}

// servesWrites fails the test unless a write through m alone commits.
func servesWrites(t *testing.T, m *etcdtest.Member) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if _, err := m.Client(t).Put(ctx, "runbook/"+m.Name, "still serving"); err != nil {
		t.Errorf("%s does not serve writes: %v", m.Name, err)
	}
}

// Review item 1: a member of three goes down (stopped, and its data disk not mounted after a
// reboot, so apply cannot start it again). apply then refuses the first hop step before it moves
// leadership or stops anything, says who is down and that nothing was stopped; the two others
// keep running and serving. Once the member is back, the same apply goes on and finishes.
func TestApplyStopsNoMemberWhileAnotherIsDown(t *testing.T) {
	t.Parallel()
	c := etcdtest.NewCluster(t, etcdtest.ClusterSpec{Size: 3, Version: etcdtest.V3_5_24})
	p := restartPlan(t, c)
	first, down, leader := c.Member(p.Members[0].Name), c.Member(p.Members[1].Name), c.Member(p.Members[2].Name)
	if err := down.Stop(); err != nil {
		t.Fatal(err)
	}
	unmounted := down.DataDir + ".unmounted"
	if err := os.Rename(down.DataDir, unmounted); err != nil {
		t.Fatal(err)
	}
	before := []int{pidOn(first), pidOn(leader)}

	dir := t.TempDir()
	a := &Applier{Plan: p, Dir: dir, Timeout: 5 * time.Second}
	res, err := a.Apply(t.Context())
	var cannot *CannotSpareError
	if !errors.As(err, &cannot) || cannot.Member != first.Name || !slices.Equal(cannot.NotServing, []string{down.Name}) {
		t.Fatalf("apply with %s down: %v (result %+v)", down.Name, err, res)
	}
	if !strings.Contains(err.Error(), "nothing was stopped") || res.Upgraded {
		t.Errorf("the refusal should say nothing was stopped: %v (upgraded %v)", err, res.Upgraded)
	}
	if after := []int{pidOn(first), pidOn(leader)}; !slices.Equal(before, after) || slices.Contains(after, 0) {
		t.Fatalf("%s and %s ran as pids %v, now %v: apply stopped a member", first.Name, leader.Name, before, after)
	}
	servesWrites(t, first)
	servesWrites(t, leader)

	// The disk is mounted again and the member started: the rerun goes on from the refused step.
	if err := os.Rename(unmounted, down.DataDir); err != nil {
		t.Fatal(err)
	}
	if err := down.Start(); err != nil {
		t.Fatal(err)
	}
	if err := down.WaitReady(t.Context()); err != nil {
		t.Fatal(err)
	}
	a.Timeout = 2 * time.Minute
	if res, err = a.Apply(t.Context()); err != nil || !res.Upgraded {
		t.Fatalf("apply once %s is back: %v (result %+v)", down.Name, err, res)
	}
	for _, m := range []*etcdtest.Member{first, down, leader} {
		if pid := pidOn(m); pid == 0 || slices.Contains(before, pid) {
			t.Errorf("%s was not restarted by the rerun (pid %d, before %v)", m.Name, pid, before)
		}
	}
}

// The resume case of item 1: an earlier run restarted m on the new binary and was interrupted
// while m was not serving yet (its process runs but hangs, as one replaying a long log does;
// SIGSTOP stands in for it). The rerun must not refuse for m itself: the others can spare it,
// so the step is done again (the hung process killed after its grace) and the plan finishes.
func TestApplyResumesAStepWhoseMemberDoesNotServeYet(t *testing.T) {
	t.Parallel()
	c := etcdtest.NewCluster(t, etcdtest.ClusterSpec{Size: 3, Version: etcdtest.V3_5_24})
	p := restartPlan(t, c)
	hung := c.Member(p.Members[0].Name)
	dir := t.TempDir()
	j, err := plan.OpenJournal(dir)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Now()
	j.Record("snapshot", plan.Started, "", at)
	j.Record("snapshot", plan.Finished, "1s", at)
	j.Record(hopStepID(0, hung.Name), plan.Started, "", at) // interrupted here
	pid := pidOn(hung)
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGCONT) })

	var events []Event
	a := &Applier{Plan: p, Dir: dir, Timeout: 2 * time.Minute, Progress: func(e Event) { events = append(events, e) }}
	res, err := a.Apply(t.Context())
	if err != nil || !res.Upgraded {
		t.Fatalf("the rerun with %s hung: %v (result %+v)\nevents %+v", hung.Name, err, res, events)
	}
	if now := pidOn(hung); now == 0 || now == pid {
		t.Errorf("%s was not restarted (pid %d, hung pid %d)", hung.Name, now, pid)
	}
	resumed := slices.IndexFunc(events, func(e Event) bool {
		return e.Kind == StepStarted && e.Member == hung.Name && strings.HasSuffix(e.Message, "(resuming: it was interrupted)")
	})
	if resumed < 0 {
		t.Errorf("the step of %s was not announced as resumed: %+v", hung.Name, events)
	}
}
