package etcdtest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/etcdmedic/etcdmedic/internal/etcdbin"
)

const modulePath = "github.com/etcdmedic/etcdmedic"

var moduleLine = regexp.MustCompile(`(?m)^module\s+` + regexp.QuoteMeta(modulePath) + `\s*$`)

// linkedBuild builds the etcdmedic binary once per test process. It is process-wide on
// purpose: every test of a package shares one build, and the file lock in buildEtcdmedic
// serialises builds across test processes (packages run in parallel by go test).
var linkedBuild struct {
	once sync.Once
	path string
	err  error
	warn sync.Once
}

// EtcdmedicBinary returns the path of an etcdmedic binary built from this checkout, for tests
// that run the CLI end to end. It is built once per test process.
func EtcdmedicBinary(t testing.TB) string {
	t.Helper()
	path, err := etcdmedicBinary() // no stale fallback: CLI tests test this checkout
	if err != nil {
		t.Fatalf("build etcdmedic: %v", err)
	}
	return path
}

func etcdmedicBinary() (string, error) {
	linkedBuild.once.Do(func() {
		linkedBuild.path, linkedBuild.err = buildEtcdmedic()
	})
	return linkedBuild.path, linkedBuild.err
}

// linkedServerBinary returns the etcdmedic binary that runs the Linked etcd server. When the
// checkout does not build right now (someone is mid-edit in cmd/), the previous build will do:
// the etcd server inside comes from the etcd module, not from this checkout.
func linkedServerBinary() (string, error) {
	path, err := etcdmedicBinary()
	if err != nil && path != "" {
		linkedBuild.warn.Do(func() {
			fmt.Fprintf(os.Stderr, "etcdtest: running the linked etcd from the previous etcdmedic build %s: %v\n", path, err)
		})
		return path, nil
	}
	return path, err
}

// buildEtcdmedic runs `go build ./cmd/etcdmedic` into a cache dir keyed by the checkout, then
// installs a copy by rename: processes exec the installed copy, which is never written in
// place, while go build keeps its own output up to date (a no-op relink when nothing changed).
// When the build fails it returns the previously installed copy, if any, with the error.
func buildEtcdmedic() (string, error) {
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	cache, err := etcdbin.CacheDir()
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256([]byte(root))
	dir := filepath.Join(cache, "linked", hex.EncodeToString(sum[:6]))
	if err := os.MkdirAll(filepath.Join(dir, "build"), 0o755); err != nil {
		return "", fmt.Errorf("create build dir: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), binaryBuildTimeout)
	defer cancel()
	unlock, err := etcdbin.LockFile(ctx, filepath.Join(dir, "build.lock"))
	if err != nil {
		return "", err
	}
	defer unlock()

	goTool, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("find the go command to build etcdmedic: %w", err)
	}
	built := filepath.Join(dir, "build", "etcdmedic")
	installed := filepath.Join(dir, "etcdmedic-test")
	cmd := exec.CommandContext(ctx, goTool, "build", "-o", built, "./cmd/etcdmedic")
	cmd.Dir = root
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		err = fmt.Errorf("go build ./cmd/etcdmedic in %s: %w\n%s", root, err, tailLines(out.String(), 40))
		if _, serr := os.Stat(installed); serr == nil {
			return installed, err
		}
		return "", err
	}
	if err := installCopy(built, installed); err != nil {
		return "", err
	}
	return installed, nil
}

// installCopy copies src to dst through a temporary file and a rename, so a process that
// execs dst always sees a complete binary.
func installCopy(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("install etcdmedic: %w", err)
	}
	defer in.Close()
	tmp := fmt.Sprintf("%s.%d.tmp", dst, os.Getpid())
	out, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o755)
	if err != nil {
		return fmt.Errorf("install etcdmedic: %w", err)
	}
	_, err = io.Copy(out, in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, dst)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("install etcdmedic at %s: %w", dst, err)
	}
	return nil
}

// moduleRoot finds etcdmedic's go.mod by walking up from the working directory (a test runs
// in its package dir), then from this source file.
func moduleRoot() (string, error) {
	var starts []string
	if wd, err := os.Getwd(); err == nil {
		starts = append(starts, wd)
	}
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		starts = append(starts, filepath.Dir(file))
	}
	for _, dir := range starts {
		for range 64 { // bounded: no path is that deep
			if data, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && moduleLine.Match(data) {
				return dir, nil
			}
			parent := filepath.Dir(dir)
			if parent == dir {
				break
			}
			dir = parent
		}
	}
	return "", fmt.Errorf("find the %s module root (go.mod) above %s", modulePath, strings.Join(starts, ", "))
}

// KubeAPIServerBinary returns the cached kube-apiserver the Kubernetes tests run, building it
// when Main did not (a -run of one test on a cold cache: about 5 minutes).
func KubeAPIServerBinary(t testing.TB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), binaryBuildTimeout)
	defer cancel()
	path, err := etcdbin.KubeAPIServerPath(ctx, etcdbin.KubeAPIServerVersion)
	if err != nil {
		t.Fatalf("build kube-apiserver: %v", err)
	}
	return path
}
