package main

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdmedic/etcdmedic/internal/etcdbin"
	"github.com/etcdmedic/etcdmedic/internal/etcdtest"
	"github.com/etcdmedic/etcdmedic/kubeworkload"
	"github.com/etcdmedic/etcdmedic/sandbox"
)

// A restore under running kube-apiservers, from a snapshot older than the live state, the way
// an operator restores last night's backup while the control plane stays up. Without
// --bump-revision and --mark-compacted, the restored etcd hands out revisions the apiservers
// and their clients have already seen: new writes get resourceVersions lower than earlier ones,
// and the apiservers' watch caches (and every informer behind them) keep objects etcd no longer
// holds. With both flags, revisions jump past anything seen and the old ones read as
// compacted: the apiservers relist from etcd, the informers relist from them, and every cache
// converges on what etcd holds. (What was written after the snapshot is lost either way: that
// is what restoring an older backup means, and the plan says so.)
func TestRestoreUnderKubernetes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		flags []string
		fixed bool
	}{
		{"without bump: revisions go back, caches stay stale", nil, false},
		{"with --bump-revision --mark-compacted: informers relist and converge", []string{"--bump-revision", "1000000000", "--mark-compacted"}, true},
	} {
		// One after the other, in this test's slot: parallel subtests wait for slots behind
		// every other test of the package and ended whole runs. (Started early, in a process of
		// its own at the start of the run, the case without bump once saw its informers
		// converge: whether they stay stale depends on when the apiservers' watches fail.)
		t.Run(tc.name, func(t *testing.T) {
			// Informers that should converge get 2 minutes to relist on a loaded machine (client-go
			// backs off up to 30 s after the errors of the restore); stale ones are shown in 20 s.
			informerWait := 20 * time.Second
			if tc.fixed {
				informerWait = 2 * time.Minute
			}
			v, again := restoreUnderKubernetes(t, tc.flags, informerWait)
			kinds := map[kubeworkload.ViolationKind]int{}
			for _, vi := range v.Violations {
				kinds[vi.Kind]++
			}
			t.Logf("after the restore: %s; violations by kind: %v; informers: %+v", v, kinds, v.Informers)
			if tc.fixed {
				if !v.Passed {
					t.Fatalf("with %v: %s\n%+v", tc.flags, v, v.Violations)
				}
				// Judged as if nothing had been restored, the same history shows what the restore
				// dropped: the checks catch acknowledged writes lost on a real cluster.
				w := again(kubeworkload.VerifyOptions{})
				t.Logf("judged without leaving out the restored-over writes: %s", w)
				if w.Passed || !hasViolation(w, kubeworkload.Lost) || !hasViolation(w, kubeworkload.HistoryViolated) {
					t.Fatalf("the writes the restore dropped went unseen: %s\n%+v", w, w.Violations)
				}
				return
			}
			if v.Passed || !hasViolation(v, kubeworkload.RevisionBackwards) || !hasViolation(v, kubeworkload.StaleInformer) {
				t.Fatalf("without the flags the restore should show resourceVersions going back and stale informers: %s\n%+v", v, v.Violations)
			}
		})
	}
}

func hasViolation(v kubeworkload.Verdict, kind kubeworkload.ViolationKind) bool {
	for _, vi := range v.Violations {
		if vi.Kind == kind {
			return true
		}
	}
	return false
}

// restoreUnderKubernetes runs a 3-member v3.6 sandbox with an apiserver on each member under
// the Kubernetes workload, snapshots it, lets the workload go on, kills every member, restores
// the snapshot with etcdmedic recover --from-snapshot (with flags), lets the workload write
// through the restored cluster, and returns the check (what was written after the snapshot
// left out).
func restoreUnderKubernetes(t *testing.T, flags []string, informerWait time.Duration) (kubeworkload.Verdict, func(kubeworkload.VerifyOptions) kubeworkload.Verdict) {
	etcd := etcdtest.Binary(t, etcdtest.V3_6).Path
	etcdutl, err := etcdbin.EtcdutlPath(t.Context(), etcdtest.V3_6)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	sb, err := sandbox.Up(ctx, sandbox.Options{Dir: filepath.Join(t.TempDir(), "sb"), Members: 3, Command: []string{etcd}})
	if sb != nil {
		t.Cleanup(func() { sb.Down(5 * time.Second) })
		for _, m := range sb.Members {
			killLocalMember(t, m.DataDir) // the members recovery restarts
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := sb.StartKubernetes(ctx, etcdtest.KubeAPIServerBinary(t), 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	kube, err := kubeworkload.Start(ctx, kubeworkload.Spec{APIServers: sb.Kubernetes.APIServers, Credentials: &sb.Kubernetes.Credentials})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kube.Stop)
	waitKubeAcked(t, kube, 100)
	cli, err := clientv3.New(clientv3.Config{Endpoints: sb.Endpoints(), DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	snapFile := filepath.Join(t.TempDir(), "nightly.db")
	saveSnapshot(t, cli, snapFile)
	waitKubeAcked(t, kube, kube.Counts().Acked+200) // written after the snapshot: the restore loses it
	for _, m := range sb.Members {
		sb.KillMember(m.Name)
	}

	planDir, backups := filepath.Join(t.TempDir(), "plan"), filepath.Join(t.TempDir(), "backups")
	args := []string{"recover", "plan", "--plan-dir", planDir, "--backup-dir", backups, "--endpoints", strings.Join(sb.Endpoints(), ","),
		"--command-timeout", "2s", "--etcd-command", etcd, "--from-snapshot", snapFile, "--etcdutl", etcdutl}
	for _, m := range sb.Members {
		args = append(args, "--data-dir", m.Name+"="+m.DataDir)
	}
	bin := etcdtest.EtcdmedicBinary(t)
	if out, err := exec.CommandContext(ctx, bin, append(args, flags...)...).CombinedOutput(); err != nil {
		t.Fatalf("recover plan: %v\n%s", err, out)
	}
	if out, err := exec.CommandContext(ctx, bin, "recover", "apply", planDir, "--yes").CombinedOutput(); err != nil {
		t.Fatalf("recover apply: %v\n%s", err, out)
	}
	if _, err := sb.WaitKubernetesReady(ctx, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	waitKubeAcked(t, kube, kube.Counts().Acked+100) // written through the restored cluster
	again := func(opts kubeworkload.VerifyOptions) kubeworkload.Verdict {
		return kubeVerify(t, kube, sb.Endpoints(), opts)
	}
	return again(kubeworkload.VerifyOptions{SkipAcknowledged: true, InformerWait: informerWait}), again
}

// waitKubeAcked waits until the Kubernetes workload has n operations acknowledged.
func waitKubeAcked(t *testing.T, w *kubeworkload.Workload, n int) {
	t.Helper()
	for i := 0; i < 600 && w.Counts().Acked < n; i++ {
		time.Sleep(100 * time.Millisecond)
	}
	if got := w.Counts().Acked; got < n {
		t.Fatalf("the Kubernetes workload got %d operations acknowledged in 60 s, want %d", got, n)
	}
}
