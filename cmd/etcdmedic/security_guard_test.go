package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/etcdmedic/etcdmedic/guard"
	"github.com/etcdmedic/etcdmedic/internal/etcdtest"
)

// A stopped member's real data dir, run against by a user that cannot read it: guard says
// UNREADABLE (exit 3), not FOREIGN, and --fix moves nothing and creates nothing (no .partial
// quarantine, no lock file), even where that user could write beside the data dir.
func TestGuardCallsADataDirItCannotReadUnreadable(t *testing.T) {
	t.Parallel()
	other := asSecondUser(t)
	c := etcdtest.NewCluster(t, etcdtest.ClusterSpec{Size: 3})
	m3 := c.Member("m3")
	if err := m3.Stop(); err != nil {
		t.Fatal(err)
	}
	volumes := filepath.Join(t.TempDir(), "volumes")
	copyDir(t, m3.DataDir, filepath.Join(volumes, "member-unreadable")) // member/ 0700, root's
	copyDir(t, m3.DataDir, filepath.Join(volumes, "dir-unreadable"))    // the data dir itself 0700
	for path, mode := range map[string]os.FileMode{volumes: 0o777, filepath.Join(volumes, "member-unreadable"): 0o755} {
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
	}
	openToOthers(t, filepath.Dir(volumes))
	eps := strings.Join(c.Endpoints(), ",")
	guardArgs := func(dataDir string, extra ...string) []string {
		return append([]string{"guard", "--data-dir", dataDir, "--name", "m3", "--peer-urls", m3.PeerURL, "--endpoints", eps, "-w", "json"}, extra...)
	}

	for _, name := range []string{"member-unreadable", "dir-unreadable"} {
		dataDir := filepath.Join(volumes, name)
		// The control: as root it is m3's own data, still a member.
		if code, out, errOut := runCLI(t, guardArgs(dataDir)...); code != 0 || !strings.Contains(out, string(guard.Valid)) {
			t.Fatalf("%s as root: exit %d, want VALID:\n%s%s", name, code, out, errOut)
		}
		for _, fix := range [][]string{nil, {"--fix"}} {
			code, out, errOut := other.run(t, guardArgs(dataDir, fix...)...)
			var res guardResult
			if err := json.Unmarshal([]byte(out), &res); err != nil {
				t.Fatalf("%s %v as %s: exit %d, no JSON: %v\n%s%s", name, fix, other.name, code, err, out, errOut)
			}
			if code != exitFailed || res.Verdict.Class != guard.Unreadable || res.Verdict.Movable || res.Quarantined != nil {
				t.Errorf("%s %v as %s: exit %d, class %s, movable %v, quarantined %v; want exit %d, UNREADABLE, nothing moved: %s",
					name, fix, other.name, code, res.Verdict.Class, res.Verdict.Movable, res.Quarantined, exitFailed, res.Verdict.Reason)
			}
			if !strings.Contains(res.Verdict.Reason, "cannot read") {
				t.Errorf("%s: the reason does not say what could not be read: %s", name, res.Verdict.Reason)
			}
		}
	}
	if ents := dirNames(t, volumes); !slices.Equal(ents, []string{"dir-unreadable", "member-unreadable"}) {
		t.Errorf("guard --fix created %v beside the data dirs", ents)
	}
	if ents := dirNames(t, other.home); len(ents) != 0 {
		t.Errorf("guard --fix created %v in its temp dir", ents)
	}
}
