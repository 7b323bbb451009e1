// Command inspect benchmarks `etcdmedic inspect` against `etcdutl snapshot status` on stopped
// etcd members whose db is 64 MiB to 1 GiB or more, and checks the targets of the issue:
// inspect under 0.1 s warm, at least 30x faster than etcdutl warm and 100x cold, and a peak
// RSS under 64 MiB that stays flat as the db grows.
//
//	go run ./bench/inspect -sizes 64MiB,256MiB,1GiB -etcd v3.6.4 -runs 5
//
// Each data dir is written by a real etcd of the given version (unique keys, no compaction, so
// the db grows), stopped with SIGTERM and kept under -out for the next run. Both tools only
// read it: every file's sha256 is compared before and after the measurements. etcdutl
// hashkv writes to the db it is given, so it is never run.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/etcdmedic/etcdmedic/bench/internal/dataset"
	"github.com/etcdmedic/etcdmedic/internal/etcdbin"
)

func main() {
	if os.Getenv(runnerEnv) != "" {
		runnerMain()
		return
	}
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench/inspect:", err)
		os.Exit(1)
	}
}

type config struct {
	sizes      []int64
	version    string
	runs       int
	out        string
	valueBytes int64
	dropCaches bool
}

func run() error {
	defaultOut := ""
	if cache, err := os.UserCacheDir(); err == nil {
		defaultOut = filepath.Join(cache, "etcdmedic", "bench-inspect")
	}
	sizes := flag.String("sizes", "64MiB,256MiB,1GiB", "comma-separated db sizes to build and measure")
	value := flag.String("value", "100KiB", "size of each value written to build the db")
	cfg := config{}
	flag.StringVar(&cfg.version, "etcd", "v3.6.4", "etcd version that writes the data dirs and whose etcdutl is compared")
	flag.IntVar(&cfg.runs, "runs", 5, "measured runs of each tool, warm and cold")
	flag.StringVar(&cfg.out, "out", defaultOut, "where the data dirs are built and kept for later runs")
	flag.BoolVar(&cfg.dropCaches, "drop-caches", true, "for cold runs, also write 1 to /proc/sys/vm/drop_caches when it is writable (drops the whole machine's page cache)")
	flag.Parse()
	if flag.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", flag.Args())
	}
	var err error
	if cfg.sizes, err = dataset.ParseSizes(*sizes); err != nil {
		return err
	}
	if cfg.valueBytes, err = dataset.ParseSize(*value); err != nil {
		return fmt.Errorf("-value: %w", err)
	}
	if cfg.runs < 1 || cfg.out == "" {
		return fmt.Errorf("-runs must be at least 1 and -out set")
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	etcd, err := etcdbin.Path(ctx, cfg.version)
	if err != nil {
		return err
	}
	etcdutl, err := etcdbin.EtcdutlPath(ctx, cfg.version)
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "bench-inspect-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	etcdmedic, err := buildEtcdmedic(ctx, tmp)
	if err != nil {
		return err
	}

	loadBefore := loadAverage()
	var results []sizeResult
	for _, size := range cfg.sizes {
		dir, info, err := ensureDataDir(ctx, etcd, cfg, size)
		if err != nil {
			return fmt.Errorf("build a %s data dir: %w", dataset.FormatSize(size), err)
		}
		res, err := measure(ctx, cfg, dir, info, etcdutl, etcdmedic)
		if err != nil {
			return fmt.Errorf("measure the %s data dir %s: %w", dataset.FormatSize(size), dir, err)
		}
		results = append(results, res)
	}
	printReport(os.Stdout, cfg, results, loadBefore)
	return nil
}

// buildEtcdmedic builds this checkout's etcdmedic, the binary an operator runs.
func buildEtcdmedic(ctx context.Context, dir string) (string, error) {
	root, err := commandOutput(ctx, "", "go", "env", "GOMOD")
	if err != nil || root == "" || root == os.DevNull {
		return "", fmt.Errorf("find the etcdmedic module (run from its checkout): %v", err)
	}
	bin := filepath.Join(dir, "etcdmedic")
	if _, err := commandOutput(ctx, filepath.Dir(root), "go", "build", "-o", bin, "./cmd/etcdmedic"); err != nil {
		return "", err
	}
	return bin, nil
}

// commandOutput runs a command in dir and returns its trimmed stdout.
func commandOutput(ctx context.Context, dir, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, errOut.String())
	}
	return string(bytes.TrimSpace(out.Bytes())), nil
}

var logf = dataset.Logger("bench/inspect").Printf
