package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/etcdmedic/etcdmedic/internal/etcdtest"
)

// backup run as an operator runs it, beside a cluster under write load: its metrics say what it
// captured, SIGTERM stores what it received before it exits, and after every disk is lost
// restore brings back every acknowledged write: the full backup, then the history replayed.
// A second backup run into the same store (two operators, or a run restarted while the old one
// lingers) overlaps the first's history without harm, and the first proves on its schedule that
// the newest point replays to the live cluster's hash.
func TestBackupRunThenRestoreEverything(t *testing.T) {
	t.Parallel()
	version := etcdtest.V3_6
	etcd, etcdutl := restoreToolsOf(t, version)
	c := etcdtest.NewCluster(t, etcdtest.ClusterSpec{Size: 3, Version: version})
	ledger := etcdtest.StartLoad(t.Context(), t, c.Client(t), etcdtest.LoadSpec{Rate: 50})
	waitAcked(t, ledger, 20)
	storeURL := "file://" + filepath.Join(t.TempDir(), "store")
	metrics := fmt.Sprintf("127.0.0.1:%d", freePortsForTest(t, 1)[0])
	run := exec.Command(etcdtest.EtcdmedicBinary(t), "backup", "run", "--store", storeURL, "--endpoints", c.Members()[0].ClientURL,
		"--segment", "500ms", "--metrics-addr", metrics, "--verify", "--etcd-command", etcd, "--etcdutl", etcdutl, "--verify-point-every", "3s")
	logPath := filepath.Join(t.TempDir(), "backup-run.log")
	log, _ := os.Create(logPath)
	run.Stdout, run.Stderr = log, log
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { run.Process.Kill(); run.Wait(); log.Close() })

	waitAcked(t, ledger, len(ledger.Acked())+50)
	second := exec.Command(etcdtest.EtcdmedicBinary(t), "backup", "run", "--store", storeURL, "--endpoints", c.Members()[1].ClientURL, "--segment", "700ms")
	second.Stdout, second.Stderr = log, log
	if err := second.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { second.Process.Kill(); second.Wait() })
	waitAcked(t, ledger, len(ledger.Acked())+100) // captured as history, after the full backup
	ledger.Stop()
	last := ledger.Acked()[len(ledger.Acked())-1].Revision
	captured := 0.0
	for i := 0; i < 100 && captured < float64(last); i++ {
		captured = scrape(t, metrics)["etcdmedic_backup_captured_revision"]
		time.Sleep(100 * time.Millisecond)
	}
	m := scrape(t, metrics)
	if captured < float64(last) || m["etcdmedic_backup_last_full_success_timestamp_seconds"] == 0 {
		b, _ := os.ReadFile(logPath)
		t.Fatalf("metrics: captured revision %v (the last acknowledged write is at %d), %v\n%s", captured, last, m, b)
	}
	for i := 0; i < 300 && m[`etcdmedic_backup_point_verifications_total{result="verified"}`] == 0; i++ {
		time.Sleep(100 * time.Millisecond)
		m = scrape(t, metrics)
	}
	if m[`etcdmedic_backup_point_verifications_total{result="verified"}`] == 0 || m[`etcdmedic_backup_point_verifications_total{result="failed"}`] > 0 {
		b, _ := os.ReadFile(logPath)
		t.Fatalf("point verifications: %v\n%s", m, b)
	}
	t.Logf("recovery-point lag %.1fs, verifications %v, points verified %v", m["etcdmedic_backup_recovery_point_lag_seconds"], m[`etcdmedic_backup_verifications_total{result="verified"}`], m[`etcdmedic_backup_point_verifications_total{result="verified"}`])
	run.Process.Signal(syscall.SIGTERM)
	second.Process.Signal(syscall.SIGTERM)
	run.Wait()
	second.Wait()
	code, out, errOut := runCLI(t, "backup", "ls", "--store", storeURL, "-w", "json")
	var listed backupResult
	if code != exitOK || json.Unmarshal([]byte(out), &listed) != nil || listed.History == nil || listed.History.Revision < last {
		t.Fatalf("backup ls after backup run: exit %d, history %+v (the last acknowledged write is at %d)\n%s\n%s", code, listed.History, last, out, errOut)
	}
	if len(listed.Backups) < 2 || listed.PointCheck == nil || listed.PointCheck.Result != "verified" {
		t.Fatalf("backup ls after two runs: %d backups (want one per run), newest point check %+v", len(listed.Backups), listed.PointCheck)
	}

	for _, mem := range c.Members() {
		mem.Kill()
		os.RemoveAll(mem.DataDir)
	}
	args := []string{"restore", "--store", storeURL, "--etcdutl", etcdutl, "--etcd-command", etcd, "-w", "json"}
	for _, mem := range c.Members() {
		args = append(args, "--data-dir", mem.Name+"="+mem.DataDir)
	}
	code, out, errOut = runCLI(t, args...)
	if code != exitOK {
		t.Fatalf("restore: exit %d\n%s\n%s", code, out, errOut)
	}
	for _, mem := range c.Members() {
		if err := mem.Start(); err != nil {
			t.Fatal(err)
		}
	}
	after := healthyAfterRestore(t, c)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	missing, err := etcdtest.MissingWrites(ctx, after, ledger.Acked())
	if err != nil || len(missing) != 0 {
		t.Fatalf("%d of %d acknowledged writes lost after the restore (%v)\n%s", len(missing), len(ledger.Acked()), err, out)
	}
	t.Logf("restored: %s", strings.Join(strings.Fields(out), " "))
}

// scrape reads a Prometheus text page into name{labels} -> value.
func scrape(t *testing.T, addr string) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return out
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		if i := strings.LastIndexByte(line, ' '); i > 0 {
			if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
				out[line[:i]] = v
			}
		}
	}
	return out
}
