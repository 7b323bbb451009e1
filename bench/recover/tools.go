package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// tools are the binaries both sides use.
type tools struct {
	etcd, etcdctl, etcdutl, etcdmedic string
}

// buildEtcdmedic builds this checkout's etcdmedic into out.
func buildEtcdmedic(ctx context.Context, out string) (string, error) {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return "", err
	}
	bin := filepath.Join(out, "etcdmedic")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/etcdmedic")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build etcdmedic (run from the repository root): %v\n%s", err, b)
	}
	return bin, nil
}

// killUnder SIGKILLs every process whose command line names a path under root (the members a
// run started, whoever started them) and waits until they are gone.
func killUnder(root string) {
	root = filepath.Clean(root) + "/"
	for range 50 {
		found := false
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			pid, err := strconv.Atoi(e.Name())
			if err != nil || pid == os.Getpid() {
				continue
			}
			b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
			if err != nil || !strings.Contains(string(b), root) {
				continue
			}
			found = true
			syscall.Kill(pid, syscall.SIGKILL)
		}
		if !found {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// copyTree copies a folder as cp -a does (a reflink where the filesystem can).
func copyTree(ctx context.Context, src, dst string) error {
	if b, err := exec.CommandContext(ctx, "cp", "-a", "--reflink=auto", src, dst).CombinedOutput(); err != nil {
		return fmt.Errorf("cp -a %s %s: %v: %s", src, dst, err, b)
	}
	return nil
}
