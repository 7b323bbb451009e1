package archive_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/etcdmedic/etcdmedic/archive"
	"github.com/etcdmedic/etcdmedic/cluster"
	"github.com/etcdmedic/etcdmedic/internal/etcdbin"
	"github.com/etcdmedic/etcdmedic/internal/etcdtest"
	"github.com/etcdmedic/etcdmedic/store"
)

// backupOf takes a full backup of a one-member cluster of version with n keys into a file://
// store.
func backupOf(t *testing.T, version string, n int) (*store.Store, string, *archive.Full) {
	t.Helper()
	c := etcdtest.NewCluster(t, etcdtest.ClusterSpec{Size: 1, Version: version})
	cli := c.Client(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	for i := 0; i < n; i++ {
		if _, err := cli.Put(ctx, fmt.Sprintf("/registry/configmaps/default/cm-%04d", i), fmt.Sprintf("value %d", i)); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	st, err := store.Open(ctx, "file://"+dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	conn := cluster.DefaultConn()
	conn.Endpoints = []string{c.Members()[0].ClientURL}
	f, err := archive.TakeFull(ctx, conn, st, archive.TakeOptions{Scratch: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	return st, dir, f
}

func verifyOptions(t *testing.T) archive.VerifyOptions {
	etcdutl, err := etcdbin.EtcdutlPath(t.Context(), etcdtest.V3_6)
	if err != nil {
		t.Fatal(err)
	}
	return archive.VerifyOptions{Etcd: []string{etcdtest.Binary(t, etcdtest.V3_6).Path}, Etcdutl: etcdutl, Scratch: t.TempDir()}
}

// The runbook's backup: taken, listed unverified, restored into a scratch member whose hash at
// the backup's revision equals the cluster's, then listed verified. A backup taken on v3.5
// restores into v3.6 the same way.
func TestABackupIsListedOnceVerifiedByRestoringIt(t *testing.T) {
	t.Parallel()
	for _, version := range []string{etcdtest.V3_6, etcdtest.V3_5_24} {
		t.Run(version, func(t *testing.T) {
			t.Parallel()
			st, _, f := backupOf(t, version, 200)
			if f.Revision < 201 || f.HashKV == 0 || f.Data.SHA256 == "" {
				t.Fatalf("backup %+v", f)
			}
			entries, err := archive.List(t.Context(), st)
			if err != nil || len(entries) != 1 || entries[0].State() != "unverified" {
				t.Fatalf("listed %+v (%v)", entries, err)
			}
			v, err := archive.Verify(t.Context(), st, f, verifyOptions(t))
			if err != nil || v.Result != "verified" {
				t.Fatalf("verify a backup taken on %s, restored into v3.6: %+v %v", version, v, err)
			}
			entries, _ = archive.List(t.Context(), st)
			if entries[0].State() != "verified" {
				t.Errorf("after verify: %s", entries[0].State())
			}
		})
	}
}

// A damaged object in the store is caught by verify (and by every download), and a snapshot
// uploaded without its manifest (a backup killed mid-upload) is not a backup.
func TestDamagedAndHalfUploadedBackups(t *testing.T) {
	t.Parallel()
	st, dir, f := backupOf(t, etcdtest.V3_6, 50)
	// A second snapshot whose manifest never made it (the process killed between the two).
	if _, err := st.Put(t.Context(), "full/20991231T000000.000Z-r000000000999.db", strings.NewReader("a snapshot's bytes")); err != nil {
		t.Fatal(err)
	}
	entries, err := archive.List(t.Context(), st)
	if err != nil || len(entries) != 1 || entries[0].ID != f.ID {
		t.Fatalf("listed %+v (%v): want only the backup with a manifest", entries, err)
	}
	data := filepath.Join(dir, f.DataKey())
	b, err := os.ReadFile(data)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0xff
	if err := os.WriteFile(data, b, 0o600); err != nil {
		t.Fatal(err)
	}
	v, err := archive.Verify(t.Context(), st, f, verifyOptions(t))
	if err != nil || v.Result != "failed" {
		t.Fatalf("verify of a damaged object: %+v %v", v, err)
	}
	t.Logf("caught: %s", v.Why)
	if entries, _ := archive.List(t.Context(), st); entries[0].State() != "failed" {
		t.Errorf("listed %s after a failed verification", entries[0].State())
	}
}
