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
// ended come back: a pass as a pass, a skip as a skip, a failure as a failure with its
// message, and a process that ran no such test (a name left in Needs.Early) as a failure.
func TestAnEarlyTestBringsBackItsOutputAndVerdict(t *testing.T) {
	t.Parallel()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ test, told, want string }{
		{"TestEarlyHelper", "pass", earlyPassed},
		{"TestEarlyHelper", "skip", earlySkipped},
		{"TestEarlyHelper", "fail", "exit status 1"},
		{"TestNoSuchTest", "pass", "its process ended without running it"},
	} {
		r, err := runEarly(exe, tc.test, []string{"-test.timeout=1m"}, []string{helperVerdictEnv + "=" + tc.told})
		if err != nil {
			t.Fatal(err)
		}
		select {
		case <-r.done:
		case <-time.After(time.Minute):
			t.Fatalf("%s told to %s: the early process did not end in a minute", tc.test, tc.told)
		}
		out := r.out.String()
		if got := r.verdict(tc.test); got != tc.want {
			t.Errorf("%s told to %s: verdict %q, want %q:\n%s", tc.test, tc.told, got, tc.want, out)
		}
		if (tc.test == "TestEarlyHelper" && !strings.Contains(out, "the helper ran alone, told to "+tc.told)) || strings.Contains(out, "TestAnEarlyTest") {
			t.Errorf("%s told to %s: the process's output:\n%s", tc.test, tc.told, out)
		}
		var exit *exec.ExitError
		if tc.told == "fail" && (!errors.As(r.err, &exit) || !strings.Contains(out, "--- FAIL: TestEarlyHelper")) {
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
	switch verdict {
	case "fail":
		t.Error("failing, as told")
	case "skip":
		t.Skip("skipping, as told")
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
