package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/etcdmedic/etcdmedic/internal/etcdtest"
)

// Review items 2, 6 and 7 on a real cluster: m1 is down, m2 and m3 still hold quorum. Each
// input below once let plan read the wrong data, miss m2 in the quorum proof (and stop m3, a
// healthy voter), plan a rejoin etcd refuses, or back up into a member's data dir. Each is
// refused, exit 3, before any member is probed or stopped: m2 and m3 keep serving, and no
// plan or backup is written.
func TestRecoverPlanRefusesMembersMixedUp(t *testing.T) {
	t.Parallel()
	c := etcdtest.NewCluster(t, etcdtest.ClusterSpec{Size: 3})
	appliedEverywhere(t, c) // each member's name is on record in every data dir
	m1, m2, m3 := c.Member("m1"), c.Member("m2"), c.Member("m3")
	if err := m1.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := quorumServes(t, c, "m1 killed"); err != nil {
		t.Fatalf("m2 and m3 elect no leader: %v", err)
	}
	copyOfM1 := filepath.Join(t.TempDir(), "m1-copy")
	copyDir(t, m1.DataDir, copyOfM1)
	for _, tc := range []struct {
		name      string
		dataDirs  []string
		backupDir string // "" for a folder of its own
		want      []string
	}{
		{"m1's data dir given for m2 too (item 2)", []string{"m1=" + m1.DataDir, "m2=" + m1.DataDir, "m3=" + m3.DataDir}, "",
			[]string{"m1's data dir", "m2's data dir", "one folder"}},
		{"a copy of m1's data dir given as m2 (item 2)", []string{"m1=" + m1.DataDir, "m2=" + copyOfM1, "m3=" + m3.DataDir}, "",
			[]string{"m1 (" + m1.DataDir + ")", "m2 (" + copyOfM1 + ")", "both hold member"}},
		{"m1 given under a name etcd does not know (item 6)", []string{"first=" + m1.DataDir, "m2=" + m2.DataDir, "m3=" + m3.DataDir}, "",
			[]string{"calls m1", "give it as m1=" + m1.DataDir}},
		{"the backup dir inside m3's data dir (item 7)", []string{"m1=" + m1.DataDir, "m2=" + m2.DataDir, "m3=" + m3.DataDir}, filepath.Join(m3.DataDir, "backups"),
			[]string{"--backup-dir", "m3's data dir"}},
	} {
		planDir, backups := filepath.Join(t.TempDir(), "plan"), tc.backupDir
		if backups == "" {
			backups = filepath.Join(t.TempDir(), "backups")
		}
		args := []string{"recover", "plan", "--plan-dir", planDir, "--backup-dir", backups, "--endpoints", strings.Join(c.Endpoints(), ","),
			"--command-timeout", "2s", "--etcd-command", etcdmedicEtcd(t)}
		for _, d := range tc.dataDirs {
			args = append(args, "--data-dir", d)
		}
		code, out, errOut := runCLI(t, args...)
		t.Logf("%s: %s", tc.name, strings.TrimSpace(errOut))
		if code != exitFailed || !strings.Contains(errOut, "nothing was stopped or written") {
			t.Fatalf("%s: exit %d, want %d and nothing stopped\n%s\n%s", tc.name, code, exitFailed, out, errOut)
		}
		for _, w := range tc.want {
			if !strings.Contains(errOut, w) {
				t.Errorf("%s: %q does not say %q", tc.name, errOut, w)
			}
		}
		for _, m := range []*etcdtest.Member{m2, m3} {
			if !m.IsRunning() {
				t.Fatalf("%s: %s was stopped", tc.name, m.Name)
			}
		}
		if err := quorumServes(t, c, tc.name); err != nil {
			t.Fatalf("%s: m2 and m3 no longer serve: %v", tc.name, err)
		}
		for _, p := range []string{filepath.Join(planDir, "plan.json"), backups} {
			if _, err := os.Stat(p); err == nil {
				t.Errorf("%s: %s was written", tc.name, p)
			}
		}
	}
}

// quorumServes writes a key, retried for a while: a write proposed while the members elect a
// leader is dropped ("request timed out") and not retried by the client.
func quorumServes(t *testing.T, c *etcdtest.Cluster, value string) (err error) {
	cli := c.Client(t)
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
		_, err = cli.Put(ctx, "test/still-serving", value)
		cancel()
		if err == nil {
			return nil
		}
	}
	return err
}
