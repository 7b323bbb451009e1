package etcdtest

import (
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// helperVerdictEnv tells TestEarlyHelper, run by the test below, how to end.
const helperVerdictEnv = "ETCDTEST_EARLY_HELPER_VERDICT"

// A test started early runs alone in a process of its own, and what it printed and how it
// ended come back: a pass as a pass, a failure as a failure with its message.
func TestAnEarlyTestBringsBackItsOutputAndVerdict(t *testing.T) {
	t.Parallel()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, verdict := range []string{"pass", "fail"} {
		r, err := runEarly(exe, "TestEarlyHelper", []string{"-test.timeout=1m"}, []string{helperVerdictEnv + "=" + verdict})
		if err != nil {
			t.Fatal(err)
		}
		select {
		case <-r.done:
		case <-time.After(time.Minute):
			t.Fatalf("%s: the early process did not end in a minute", verdict)
		}
		out := r.out.String()
		if !strings.Contains(out, "the helper ran alone, told to "+verdict) || strings.Contains(out, "TestAnEarlyTest") {
			t.Errorf("%s: the process's output:\n%s", verdict, out)
		}
		var exit *exec.ExitError
		switch {
		case verdict == "pass" && r.err != nil:
			t.Errorf("a passing test ended its process with %v:\n%s", r.err, out)
		case verdict == "fail" && (!errors.As(r.err, &exit) || !strings.Contains(out, "--- FAIL: TestEarlyHelper")):
			t.Errorf("a failing test ended its process with %v:\n%s", r.err, out)
		}
	}
}

// TestEarlyHelper is the test TestAnEarlyTestBringsBackItsOutputAndVerdict starts early.
func TestEarlyHelper(t *testing.T) {
	verdict := os.Getenv(helperVerdictEnv)
	if verdict == "" || os.Getenv(earlyTestEnv) != t.Name() {
		t.Skip("run by TestAnEarlyTestBringsBackItsOutputAndVerdict")
	}
	t.Logf("the helper ran alone, told to %s", verdict)
	if verdict == "fail" {
		t.Error("failing, as told")
	}
}

// A package that is not the run's longest gives way to it: every thread of its test binary,
// and every process it starts, runs at backgroundNice.
func TestABackgroundPackageGivesWay(t *testing.T) {
	t.Parallel()
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	for _, task := range tasks {
		tid, _ := strconv.Atoi(task.Name())
		if nice, err := threadNice(tid); err == nil && nice < backgroundNice {
			t.Errorf("thread %d runs at nice %d", tid, nice)
		}
	}
	out, err := exec.Command("sh", "-c", "cut -d' ' -f19 /proc/self/stat").Output()
	if err != nil {
		t.Fatal(err)
	}
	if nice, _ := strconv.Atoi(strings.TrimSpace(string(out))); nice < backgroundNice {
		t.Errorf("a process started by a test runs at nice %d", nice)
	}
}
