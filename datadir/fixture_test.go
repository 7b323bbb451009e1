package datadir_test

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/etcdmedic/etcdmedic/internal/etcdtest"
)

var (
	templateOnce sync.Once
	templateDir  string
	templateErr  error
	templateRoot string
)

func TestMain(m *testing.M) {
	code := etcdtest.Main(m, etcdtest.Needs{
		Servers: []string{etcdtest.V3_5_19, etcdtest.V3_5_21, etcdtest.V3_5_24, etcdtest.V3_6, etcdtest.Linked},
	})
	if templateRoot != "" {
		os.RemoveAll(templateRoot)
	}
	os.Exit(code)
}

// stoppedMember returns a fresh copy of a real, cleanly stopped member data dir (a one-member
// cluster of the linked etcd with a few hundred writes). The original is made once per test
// binary; each caller gets its own copy to damage.
func stoppedMember(t *testing.T) string {
	t.Helper()
	templateOnce.Do(func() {
		templateRoot, templateErr = os.MkdirTemp("", "etcdmedic-datadir-fixture-")
		if templateErr != nil {
			return
		}
		// The fixture outlives the test that builds it, so run it under a throwaway sub-test
		// context: the cluster must be stopped before the copy is taken anyway.
		templateDir, templateErr = buildTemplate(t, templateRoot)
	})
	if templateErr != nil {
		t.Fatalf("build fixture data dir: %v", templateErr)
	}
	dst := filepath.Join(t.TempDir(), "m1.etcd")
	if err := copyTree(templateDir, dst); err != nil {
		t.Fatal(err)
	}
	return dst
}

func buildTemplate(t *testing.T, root string) (string, error) {
	var dir string
	ok := t.Run("fixture", func(t *testing.T) {
		c := etcdtest.NewCluster(t, etcdtest.ClusterSpec{Size: 1, Version: etcdtest.Linked})
		cli := c.Client(t)
		for i := 0; i < 300; i++ {
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			_, err := cli.Put(ctx, fmt.Sprintf("fixture/%04d", i), fmt.Sprintf("value-%d", i))
			cancel()
			if err != nil {
				t.Fatal(err)
			}
		}
		m := c.Member("m1")
		if err := m.Stop(); err != nil {
			t.Fatal(err)
		}
		dir = filepath.Join(root, "m1.etcd")
		if err := copyTree(m.DataDir, dir); err != nil {
			t.Fatal(err)
		}
	})
	if !ok {
		return "", fmt.Errorf("the fixture cluster failed (see the fixture sub-test)")
	}
	return dir, nil
}

func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		if d.IsDir() {
			return os.MkdirAll(target, info.Mode().Perm()|0o700)
		}
		in, err := os.Open(p)
		if err != nil {
			return err
		}
		defer in.Close()
		out, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, info.Mode().Perm())
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, in); err != nil {
			out.Close()
			return err
		}
		return out.Close()
	})
}
