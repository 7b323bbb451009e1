package drills

import (
	"os"
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
	bin := etcdtest.EtcdmedicBinary(t)
	etcdtest.KubeAPIServerBinary(t)
	report := filepath.Join(t.TempDir(), "drills.html")
	// About 6 minutes alone here, 9.5 to 10.5 beside cmd/etcdmedic's tests (2.5 alone without
	// --kubernetes): the run's longest test. There its workload makes 190 to 410 operations a
	// second (66 in the power-cut drill, on FUSE), and the drills wait up to 2 minutes each
	// for their 10,000.
	code, out := etcdtest.RunWithin(t, 15*time.Minute, bin, "drill", "--kubernetes", "--report", report)
	// The power-cut drill needs FUSE: where there is none it says so and is skipped.
	if code != 0 || strings.Count(out, "PASSED")+strings.Count(out, "SKIPPED: ") != 5 || strings.Contains(out, "FAILED") {
		t.Fatalf("drill: exit %d:\n%s", code, out)
	}
	var table []string // the summary, for go test -v: each drill's operations and outage under this run's load
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "DRILL ") || strings.HasSuffix(line, "PASSED") {
			table = append(table, line)
		}
		if strings.Contains(line, "acknowledged writes lost") && !strings.HasSuffix(line, " 0 acknowledged writes lost") {
			t.Errorf("lost writes: %s", line)
		}
		if m := workloadOps.FindStringSubmatch(line); m != nil && strings.HasSuffix(line, "PASSED") {
			if ops, _ := strconv.Atoi(m[1]); ops < 10_000 {
				t.Errorf("fewer than 10,000 operations acknowledged: %s", line)
			}
		}
	}
	t.Logf("drill --kubernetes:\n%s", strings.Join(table, "\n"))
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

// workloadOps is the WORKLOAD OPS column of the drill table: "11545 (1194/s)".
var workloadOps = regexp.MustCompile(`\s(\d+) \(\d+/s\)\s`)

// Incident 3 by hand: with --naive the upgrade drill swaps a member's binary for v3.6 in place
// and shows it failing to start on the drifted membership, with nothing lost. Not parallel: it
// runs after the suite, never beside the suite's own upgrade drill (beside it, on a loaded
// machine, one of the two once timed out promoting a learner; after the suite, CI-37 did too:
// sandbox.AddMember now waits for a decided cluster version before a member joins, and fails
// at once, with the member's log, when the new member's etcd exits).
func TestDrillNaiveUpgradeFails(t *testing.T) {
	bin := etcdtest.EtcdmedicBinary(t)
	code, out := etcdtest.RunWithin(t, 3*time.Minute, bin, "drill", "upgrade", "--naive")
	if code != 0 || !strings.Contains(out, "too many learner members in cluster") || !strings.Contains(out, "PASSED") {
		t.Fatalf("drill upgrade --naive: exit %d:\n%s", code, out)
	}
}
