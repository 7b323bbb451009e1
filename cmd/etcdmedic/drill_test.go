package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/etcdmedic/etcdmedic/internal/etcdtest"
)

// The README's first command: every incident drill passes on a fresh machine, losing nothing,
// each with at least 10,000 operations of the workload acknowledged and its history judged
// linearizable; --report writes the page of charts.
//
// The suite runs with --kubernetes: the same drills, each also with a kube-apiserver beside
// every member under a client-go workload, checked after the repair.
func TestDrillEveryIncident(t *testing.T) {
	t.Parallel() // all its processes and folders are its own: it overlaps the other end-to-end tests
	run := drillSuite
	if run == nil {
		t.Fatal("TestMain did not start the drill suite")
	}
	<-run.done
	if run.err != nil {
		t.Fatalf("drill: %v", run.err)
	}
	code, out, report := run.code, run.out, run.report
	// The power-cut drill needs FUSE: where there is none it says so and is skipped.
	if code != 0 || strings.Count(out, "PASSED")+strings.Count(out, "SKIPPED: ") != 5 || strings.Contains(out, "FAILED") {
		t.Fatalf("drill: exit %d:\n%s", code, out)
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "acknowledged writes lost") && !strings.HasSuffix(line, " 0 acknowledged writes lost") {
			t.Errorf("lost writes: %s", line)
		}
		if m := workloadOps.FindStringSubmatch(line); m != nil && strings.HasSuffix(line, "PASSED") {
			if ops, _ := strconv.Atoi(m[1]); ops < 10_000 {
				t.Errorf("fewer than 10,000 operations acknowledged: %s", line)
			}
		}
	}
	if ran := strings.Count(out, "PASSED"); strings.Count(out, "--kubernetes (kube-apiserver ") != ran {
		t.Errorf("every drill that ran should report its Kubernetes check, passed:\n%s", out)
	}
	page, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"<svg", "stale-volume", "quorum-loss", "upgrade", "power-cut", "total-loss", "write outage"} {
		if !strings.Contains(string(page), want) {
			t.Errorf("the report lacks %q", want)
		}
	}
}

// drillSuite is TestDrillEveryIncident's run of `etcdmedic drill --kubernetes`, started by
// TestMain before the first test. About 6 minutes alone here and 10 beside the other tests
// (2.5 alone without --kubernetes), it is the package's longest test by far: started with the
// tests that cannot run in parallel, which leave a core idle, it ends about when the others
// do, where started among the parallel tests it ran on for minutes after them.
var drillSuite *drillRun

type drillRun struct {
	done   chan struct{} // closed when the run has ended
	code   int
	out    string
	err    error // the drill could not be run (not: it failed)
	report string
}

// startDrillSuite starts the drill suite in the background when TestDrillEveryIncident is
// selected, bounded at 15 minutes.
func startDrillSuite() {
	if !etcdtest.Selected("TestDrillEveryIncident") {
		return
	}
	run := &drillRun{done: make(chan struct{})}
	drillSuite = run
	bin, err := etcdtest.EtcdmedicBinaryPath()
	if err != nil {
		run.err = err
		close(run.done)
		return
	}
	dir, err := os.MkdirTemp("", "drill-suite-")
	if err != nil {
		run.err = err
		close(run.done)
		return
	}
	run.report = filepath.Join(dir, "drills.html")
	go func() {
		defer close(run.done)
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, "drill", "--kubernetes", "--report", run.report)
		out, err := cmd.CombinedOutput()
		run.out = string(out)
		var exit *exec.ExitError
		switch {
		case err == nil:
		case ctx.Err() != nil:
			run.err = fmt.Errorf("not finished within 15 minutes:\n%s", out)
		case errorAs(err, &exit):
			run.code = exit.ExitCode()
		default:
			run.err = err
		}
	}()
}

// workloadOps is the WORKLOAD OPS column of the drill table: "11545 (1194/s)".
var workloadOps = regexp.MustCompile(`\s(\d+) \(\d+/s\)\s`)

// Incident 3 by hand: with --naive the upgrade drill swaps a member's binary for v3.6 in place
// and shows it failing to start on the drifted membership, with nothing lost.
func TestDrillNaiveUpgradeFails(t *testing.T) {
	bin := etcdtest.EtcdmedicBinary(t)
	code, out := runBinary(t, bin, "drill", "upgrade", "--naive")
	if code != 0 || !strings.Contains(out, "too many learner members in cluster") || !strings.Contains(out, "PASSED") {
		t.Fatalf("drill upgrade --naive: exit %d:\n%s", code, out)
	}
}
