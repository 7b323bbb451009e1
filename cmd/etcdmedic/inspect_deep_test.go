package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/etcdmedic/etcdmedic/finding"
	"github.com/etcdmedic/etcdmedic/internal/etcdtest"
)

// `inspect --deep` on a member whose db has a damaged page: the built binary exits 2 with the
// finding, and no stack trace. (bbolt's own checker crashed the process on these pages.)
func TestInspectDeepOnADamagedPageNeverCrashes(t *testing.T) {
	t.Parallel()
	c := etcdtest.NewCluster(t, etcdtest.ClusterSpec{Size: 1, Version: etcdtest.Linked})
	cli := c.Client(t)
	for i := range 300 {
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		_, err := cli.Put(ctx, fmt.Sprintf("deep/%04d", i), fmt.Sprintf("value-%d", i))
		cancel()
		if err != nil {
			t.Fatal(err)
		}
	}
	m := c.Member("m1")
	if err := m.Stop(); err != nil {
		t.Fatal(err)
	}
	bin := etcdtest.EtcdmedicBinary(t)
	for _, tc := range []struct {
		name, finding string
		damage        func(root uint64, kids []uint64) (page uint64, change func(p []byte))
	}{
		{"garbage over a leaf page", finding.IDBackendCorrupt, func(_ uint64, kids []uint64) (uint64, func([]byte)) {
			return kids[0], func(p []byte) {
				r := rand.New(rand.NewPCG(5, 6))
				for i := range p {
					p[i] = byte(r.Uint32())
				}
			}
		}},
		{"a branch pointing back at itself", finding.IDBackendUnreadable, func(root uint64, kids []uint64) (uint64, func([]byte)) {
			return root, func(p []byte) { binary.LittleEndian.PutUint64(p[16+16*(len(kids)-1)+8:], root) }
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "m1.etcd")
			copyDir(t, m.DataDir, dir)
			damageKeyBucketPage(t, filepath.Join(dir, "member", "snap", "db"), tc.damage)
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, "inspect", "--deep", "-w", "json", dir)
			var stderr strings.Builder
			cmd.Stderr = &stderr
			out, _ := cmd.Output()
			code := cmd.ProcessState.ExitCode()
			if strings.Contains(stderr.String(), "goroutine ") || strings.Contains(stderr.String(), "panic:") {
				t.Fatalf("inspect --deep crashed (exit %d):\n%s", code, stderr.String())
			}
			var res struct {
				Findings []finding.Finding `json:"findings"`
			}
			if err := json.Unmarshal(out, &res); err != nil || code != exitCritical || !hasFinding(res.Findings, tc.finding, finding.Critical) {
				t.Fatalf("want exit %d with finding %s, got exit %d, %v: %s %s", exitCritical, tc.finding, code, err, out, stderr.String())
			}
		})
	}
}

// damageKeyBucketPage rewrites one page of the key bucket's tree, which must be a branch page
// (root) over leaves (kids), chosen by damage.
func damageKeyBucketPage(t *testing.T, dbPath string, damage func(root uint64, kids []uint64) (uint64, func([]byte))) {
	t.Helper()
	db, err := bolt.Open(dbPath, 0o400, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	pageSize := int64(db.Info().PageSize)
	var root uint64
	db.View(func(tx *bolt.Tx) error {
		root = uint64(tx.Bucket([]byte("key")).Root())
		return nil
	})
	db.Close()
	f, err := os.OpenFile(dbPath, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p := make([]byte, pageSize)
	if _, err := f.ReadAt(p, int64(root)*pageSize); err != nil {
		t.Fatal(err)
	}
	if binary.LittleEndian.Uint16(p[8:]) != 0x01 {
		t.Fatalf("the key bucket's root %d is not a branch page", root)
	}
	var kids []uint64
	for i := range int(binary.LittleEndian.Uint16(p[10:])) {
		kids = append(kids, binary.LittleEndian.Uint64(p[16+16*i+8:]))
	}
	id, change := damage(root, kids)
	if _, err := f.ReadAt(p, int64(id)*pageSize); err != nil {
		t.Fatal(err)
	}
	change(p)
	if _, err := f.WriteAt(p, int64(id)*pageSize); err != nil {
		t.Fatal(err)
	}
}
