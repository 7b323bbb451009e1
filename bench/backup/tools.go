package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// buildEtcdmedic builds this checkout's etcdmedic into out.
func buildEtcdmedic(ctx context.Context, out string) (string, error) {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return "", err
	}
	bin := filepath.Join(out, "etcdmedic")
	if b, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/etcdmedic").CombinedOutput(); err != nil {
		return "", fmt.Errorf("build etcdmedic (run from the repository root): %v\n%s", err, b)
	}
	return bin, nil
}
