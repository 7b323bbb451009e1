package datadir_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/etcdmedic/etcdmedic/datadir"
	"github.com/etcdmedic/etcdmedic/finding"
	"github.com/etcdmedic/etcdmedic/internal/etcdtest"
)

// A new member whose first start failed (its peers unreachable) is left with member/snap/db and
// no WAL: etcd opens its backend before it fetches the cluster and creates its WAL. inspect
// calls it a bootstrap leftover (info, not critical), since etcd started there bootstraps again;
// it said critical data-without-wal, and guard INCOMPLETE forever (review item 7). A db with
// real data and no WAL stays data-without-wal.
func TestInspectBootstrapLeftover(t *testing.T) {
	t.Parallel()
	for _, version := range []string{etcdtest.V3_5_19, etcdtest.V3_6, etcdtest.Linked} {
		t.Run("a failed first start of "+version, func(t *testing.T) {
			t.Parallel()
			dir := failedFirstStart(t, version)
			r, err := Inspect(dir, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if r.Kind != KindBootstrapLeftover || r.Backend == nil || r.Backend.ConsistentIndex != 0 {
				t.Fatalf("want kind %s with its backend read, got %s (%s), backend %+v", KindBootstrapLeftover, r.Kind, r.KindReason, r.Backend)
			}
			fs := finding.ForDataDir(r)
			wantFinding(t, r, finding.IDBootstrapLeftover)
			if w := finding.Worst(fs); w != finding.Info {
				t.Errorf("a bootstrap leftover is not damage: worst finding %s: %+v", w, fs)
			}
		})
	}
	t.Run("a db with real data and no WAL", func(t *testing.T) {
		t.Parallel()
		dir := stoppedMember(t)
		if err := os.RemoveAll(filepath.Join(dir, "member", "wal")); err != nil {
			t.Fatal(err)
		}
		r, err := Inspect(dir, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if r.Kind != KindDataWithoutWAL {
			t.Fatalf("want kind %s, got %s (%s)", KindDataWithoutWAL, r.Kind, r.KindReason)
		}
		wantFinding(t, r, finding.IDDataWithoutWAL)
	})
}

// failedFirstStart starts a new member of version that joins an existing cluster whose only
// other member does not answer: etcd exits, and leaves its data dir as it was then.
func failedFirstStart(t *testing.T, version string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "m4.etcd")
	peer, client := "http://"+freeAddr(t), "http://"+freeAddr(t)
	cmd := etcdtest.Binary(t, version).Command("--name", "m4", "--data-dir", dir,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
		"--listen-client-urls", client, "--advertise-client-urls", client,
		"--initial-cluster", fmt.Sprintf("m1=http://%s,m4=%s", freeAddr(t), peer), "--initial-cluster-state", "existing")
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	done := make(chan error, 1)
	cmd.Stdout, cmd.Stderr = nil, nil
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("etcd joined a cluster that does not answer")
		}
	case <-ctx.Done():
		cmd.Process.Kill()
		<-done
		t.Fatal("etcd did not give up on a cluster that does not answer")
	}
	if st, err := os.Stat(filepath.Join(dir, "member", "snap", "db")); err != nil || !st.Mode().IsRegular() {
		t.Fatalf("the failed start left no member/snap/db: %v", err)
	}
	return dir
}

// freeAddr is a loopback address nothing listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
