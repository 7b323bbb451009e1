package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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

// copyTree copies a folder as cp -a does (a reflink where the filesystem can).
func copyTree(ctx context.Context, src, dst string) error {
	if b, err := exec.CommandContext(ctx, "cp", "-a", "--reflink=auto", src, dst).CombinedOutput(); err != nil {
		return fmt.Errorf("cp -a %s %s: %v: %s", src, dst, err, b)
	}
	return nil
}
