package history

import (
	"context"
	"os/exec"
	"testing"
	"time"

	"github.com/etcdmedic/etcdmedic/internal/etcdtest"
	"github.com/etcdmedic/etcdmedic/workload"
)

// runWorkload runs the default workload on c for d and returns its history.
func runWorkload(t *testing.T, c *etcdtest.Cluster, d time.Duration) *workload.History {
	t.Helper()
	w, err := workload.Start(t.Context(), c.Endpoints(), workload.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(d)
	return w.Stop()
}

// readFinal reads the workload's prefix after it stopped, and logs what the workload did.
func readFinal(t *testing.T, c *etcdtest.Cluster, h *workload.History) {
	t.Helper()
	if err := h.ReadFinal(t.Context(), c.Endpoints(), nil); err != nil {
		t.Fatal(err)
	}
	t.Log(h.Summary())
}

// A healthy 3-member v3.6 cluster under the full workload passes every check.
func TestHealthyClusterUnderLoadPasses(t *testing.T) {
	c := etcdtest.NewCluster(t, etcdtest.ClusterSpec{Size: 3, Version: etcdtest.V3_6})
	h := runWorkload(t, c, 8*time.Second)
	readFinal(t, c, h)
	started := time.Now()
	v := Check(h)
	t.Logf("verdict %s in %s", v, time.Since(started).Round(time.Millisecond))
	if v.Result != Passed {
		t.Fatal(v)
	}
}

// Restoring every member from copies of their data dirs taken earlier, behind the workload's
// back, loses the writes acknowledged since and brings back the keys deleted since: the
// checker names it.
func TestRestoredOlderCopyLosesAcknowledgedWrites(t *testing.T) {
	c := etcdtest.NewCluster(t, etcdtest.ClusterSpec{Size: 3, Version: etcdtest.V3_6})
	w, err := workload.Start(t.Context(), c.Endpoints(), workload.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	copies := t.TempDir()
	stopAll(t, c)
	for _, m := range c.Members() {
		copyDir(t, m.DataDir, copies+"/"+m.Name)
	}
	startAll(t, c)
	time.Sleep(3 * time.Second) // the workload resumes and writes past the copies
	h := w.Stop()

	stopAll(t, c)
	for _, m := range c.Members() {
		run(t, "rm", "-rf", m.DataDir)
		copyDir(t, copies+"/"+m.Name, m.DataDir)
	}
	startAll(t, c)
	readFinal(t, c, h)

	v := Check(h)
	t.Logf("verdict %s", v)
	if v.Result != Violated || (v.Violation.Rule != LostWrite && v.Violation.Rule != DeleteUndone) {
		t.Fatalf("verdict %s, want a lost write or an undone delete", v)
	}
	rules := map[Rule]int{}
	for _, found := range finalState(h) {
		rules[found.Rule]++
	}
	t.Logf("final state violations: %v", rules)
	if rules[LostWrite] == 0 || rules[DeleteUndone] == 0 {
		t.Errorf("final state violations %v, want both lost writes and undone deletes", rules)
	}
}

func stopAll(t *testing.T, c *etcdtest.Cluster) {
	t.Helper()
	for _, m := range c.Members() {
		if err := m.Stop(); err != nil {
			t.Fatal(err)
		}
	}
}

func startAll(t *testing.T, c *etcdtest.Cluster) {
	t.Helper()
	for _, m := range c.Members() {
		if err := m.Start(); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for _, m := range c.Members() {
		if err := m.WaitReady(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

func copyDir(t *testing.T, from, to string) {
	t.Helper()
	run(t, "cp", "-a", from, to)
}

func run(t *testing.T, name string, args ...string) {
	t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
}
