package etcdtest

import (
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"
)

// earlyTestEnv names the one test a re-executed test binary runs for Main's early start.
const earlyTestEnv = "ETCDTEST_EARLY_TEST"

// earlyRun is a test of Needs.Early running in a process of its own: the test binary again,
// with -test.run for that test alone.
type earlyRun struct {
	done chan struct{}
	out  strings.Builder
	err  error
	took time.Duration
}

// earlyRuns are the tests started early, by name. Main writes it before the tests run.
var earlyRuns = map[string]*earlyRun{}

// startEarly starts each test of names in a process of its own, at once, when the whole
// package runs once (no -test.run, -test.skip or -test.list, -test.count 1); a run of some
// tests runs them in this process, where they are.
//
// go test gives its -parallel slots to the waiting parallel tests in no order a test can
// choose (the scheduler's, roughly the reverse of their order in the source, and not even
// that in every run): the package's longest test, about two minutes and most of it waiting,
// was started 5 minutes into a full run and ended it alone, the machine two-thirds idle.
// Its process lives in this run's root, so the watchdog ends it with this test binary.
func startEarly(names []string) {
	if len(names) == 0 || os.Getenv(earlyTestEnv) != "" || flagValue("test.run") != "" ||
		flagValue("test.skip") != "" || flagValue("test.list") != "" || flagValue("test.count") != "1" {
		return
	}
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintf(os.Stderr, "etcdtest: the early tests run in their turn: %v\n", err)
		return
	}
	var args []string
	if timeout := flagValue("test.timeout"); timeout != "" {
		args = append(args, "-test.timeout="+timeout)
	}
	if flagValue("test.short") == "true" {
		args = append(args, "-test.short")
	}
	for _, name := range names {
		r, err := runEarly(exe, name, args, nil)
		if err != nil {
			fmt.Fprintf(os.Stderr, "etcdtest: %s runs in its turn: %v\n", name, err)
			continue
		}
		earlyRuns[name] = r
	}
}

// runEarly starts test name of test binary exe, alone, in a process of its own, with args and
// env added to its own.
func runEarly(exe, name string, args, env []string) (*earlyRun, error) {
	args = append([]string{"-test.run=^" + regexp.QuoteMeta(name) + "$", "-test.count=1", "-test.v=true"}, args...)
	r := &earlyRun{done: make(chan struct{})}
	cmd := exec.Command(exe, args...)
	// Its run root is made inside this one's (TMPDIR), on this one's tmpfs if there is one: not
	// a second tmpfs mounted inside the first.
	cmd.Env = append(append(os.Environ(), earlyTestEnv+"="+name, onDiskEnv+"=1"), env...)
	cmd.Stdout, cmd.Stderr = &r.out, &r.out
	started := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		r.err = cmd.Wait()
		r.took = time.Since(started)
		close(r.done)
	}()
	return r, nil
}

// RanEarly reports whether t was started early, in a process of its own, by Main (its name is
// in Needs.Early and the whole package runs). Then t is parallel, waits for that process and
// reports its output and verdict as its own, and the test returns at once:
//
//	if etcdtest.RanEarly(t) {
//		return
//	}
//	t.Parallel()
//
// Otherwise (a run of some tests, or the early process itself) the test runs here.
func RanEarly(t *testing.T) bool {
	r := earlyRuns[t.Name()]
	if r == nil {
		return false
	}
	t.Parallel()
	<-r.done // bounded by the process's own -test.timeout
	out := r.out.String()
	t.Logf("ran in a process of its own from the start of the run (%s):\n%s", r.took.Round(time.Second), out)
	switch v := r.verdict(t.Name()); v {
	case earlyPassed:
	case earlySkipped:
		t.Skip("skipped in its own process")
	default:
		t.Errorf("%s, run in a process of its own: %s", t.Name(), v)
	}
	return true
}

const (
	earlyPassed  = "passed"
	earlySkipped = "skipped"
)

// verdict is how test name ended in r's process: earlyPassed, earlySkipped, or what went wrong
// (it failed, or the process ran no such test).
func (r *earlyRun) verdict(name string) string {
	out := r.out.String()
	switch {
	case r.err != nil:
		return r.err.Error()
	case strings.Contains(out, "--- SKIP: "+name+" "):
		return earlySkipped
	case strings.Contains(out, "--- PASS: "+name+" "):
		return earlyPassed
	}
	return "its process ended without running it"
}
