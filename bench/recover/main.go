// Command recover benchmarks `etcdmedic recover` against the manual recovery of incident 2,
// written as a bare bash script, on the same data: a 3-member cluster of the given etcd version
// filled to each size, quorum lost by killing two members (the third keeps running alone).
//
//	go run ./bench/recover -sizes 256MiB,1GiB -etcd v3.6.4 -runs 3
//
// The script stops the survivor, picks the best member with `etcdutl snapshot status`, starts
// it with --force-new-cluster, restarts it without, then wipes, adds as a learner, starts,
// waits for and promotes each other member, and verifies (every endpoint healthy, equal
// hashkv). etcdmedic runs `recover plan` and `recover apply --yes`, which also backs up every
// data dir with checksums and verifies the backups. Runs alternate between the two tools on
// fresh copies of the same data dirs; medians, their ratio and a per-step breakdown are
// printed as a markdown table. The target of issue 5: etcdmedic, backups included, takes no
// longer than the script without backups (ratio <= 1.0).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/etcdmedic/etcdmedic/bench/internal/dataset"
	"github.com/etcdmedic/etcdmedic/internal/etcdbin"
)

var logf = dataset.Logger("bench/recover").Printf

type config struct {
	sizes      []int64
	version    string
	runs       int
	out        string
	valueBytes int64
	etcdmedic  string
	keep       bool
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench/recover:", err)
		os.Exit(1)
	}
}

func run() error {
	defaultOut := ""
	if cache, err := os.UserCacheDir(); err == nil {
		defaultOut = filepath.Join(cache, "etcdmedic", "bench-recover")
	}
	sizes := flag.String("sizes", "256MiB,1GiB", "comma-separated db sizes to build and measure")
	value := flag.String("value", "100KiB", "size of each value written to build the db")
	cfg := config{}
	flag.StringVar(&cfg.version, "etcd", "v3.6.4", "etcd version of the cluster (etcd, etcdctl and etcdutl of that release)")
	flag.IntVar(&cfg.runs, "runs", 3, "measured runs of each tool per size (alternating)")
	flag.StringVar(&cfg.out, "out", defaultOut, "where the data sets are built and kept for later runs")
	flag.StringVar(&cfg.etcdmedic, "etcdmedic", "", "etcdmedic binary (default: built from this checkout)")
	flag.BoolVar(&cfg.keep, "keep", false, "keep each run's folder (data dirs, backups, logs) instead of deleting it")
	flag.Parse()
	if flag.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", flag.Args())
	}
	var err error
	if cfg.sizes, err = dataset.ParseSizes(*sizes); err != nil {
		return fmt.Errorf("-sizes: %w", err)
	}
	if cfg.valueBytes, err = dataset.ParseSize(*value); err != nil {
		return fmt.Errorf("-value: %w", err)
	}
	if cfg.runs < 1 || cfg.out == "" {
		return fmt.Errorf("-runs must be at least 1 and -out set")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	var tools tools
	if tools.etcd, err = etcdbin.Path(ctx, cfg.version); err != nil {
		return err
	}
	if tools.etcdctl, err = etcdbin.EtcdctlPath(ctx, cfg.version); err != nil {
		return err
	}
	if tools.etcdutl, err = etcdbin.EtcdutlPath(ctx, cfg.version); err != nil {
		return err
	}
	if tools.etcdmedic = cfg.etcdmedic; tools.etcdmedic == "" {
		if tools.etcdmedic, err = buildEtcdmedic(ctx, cfg.out); err != nil {
			return err
		}
	}
	var results []sizeResult
	for _, size := range cfg.sizes {
		set, err := ensureDataSet(ctx, tools, cfg, size)
		if err != nil {
			return err
		}
		r, err := measure(ctx, tools, cfg, set)
		if err != nil {
			return err
		}
		results = append(results, r)
	}
	report(os.Stdout, cfg, results)
	return nil
}
