// Command backup benchmarks etcdmedic's backups against what an operator would otherwise run,
// on one member of etcd filled to -size, with a real S3 server (SeaweedFS) as the store.
// Run from the repository root:
//
//	go run ./bench/backup -size 1GiB -etcd v3.6.16 -runs 3
//
// It measures:
//   - a full backup: etcdmedic backup now --store s3://... (snapshot, trailer and db checked,
//     hashkv asked, zstd, uploaded, manifest) against etcdctl snapshot save to a file followed
//     by an upload of the same bytes to the same bucket (what aws s3 cp does), alternating;
//   - the recovery point under load: writers at 1,000+ acknowledged writes a second while
//     etcdmedic's capture stores the history every second; for each write, the time from its
//     acknowledgement to the moment its revision was in the store (p50, p99, max);
//   - a restore: etcdmedic restore (download, checks, replay of the history after the full
//     backup, etcdutl) against etcdutl snapshot restore of a local snapshot file;
//   - what the capture costs the cluster (-only cost): write throughput, latency and etcd's CPU
//     per write on a fresh member, without and with etcdmedic backup run beside it.
//
// Medians and ratios are printed as markdown, for BENCHMARKS.md.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/etcdmedic/etcdmedic/bench/internal/dataset"
	"github.com/etcdmedic/etcdmedic/internal/etcdbin"
)

var logf = dataset.Logger("bench/backup").Printf

type config struct {
	size, valueBytes int64
	version, out     string
	runs             int
	loadSeconds      int
	rate             int
	costSeconds      int
	only             string
}

type tools struct{ etcd, etcdctl, etcdutl, etcdmedic string }

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench/backup:", err)
		os.Exit(1)
	}
}

func run() error {
	defaultOut := ""
	if cache, err := os.UserCacheDir(); err == nil {
		defaultOut = filepath.Join(cache, "etcdmedic", "bench-backup")
	}
	size := flag.String("size", "1GiB", "db size to build and back up")
	value := flag.String("value", "100KiB", "size of each value written to build the db")
	cfg := config{}
	flag.StringVar(&cfg.version, "etcd", "v3.6.16", "etcd version (etcd, etcdctl and etcdutl of that release)")
	flag.IntVar(&cfg.runs, "runs", 3, "measured runs of each tool (alternating)")
	flag.IntVar(&cfg.loadSeconds, "load", 30, "seconds of write load for the recovery point")
	flag.IntVar(&cfg.rate, "rate", 1200, "writes a second asked of the writer for the recovery point")
	flag.StringVar(&cfg.out, "out", defaultOut, "where the data set is built and kept for later runs")
	flag.IntVar(&cfg.costSeconds, "cost-seconds", 20, "seconds of each window of the capture's cost")
	flag.StringVar(&cfg.only, "only", "", "run one part: backup (full, restore, recovery point) or cost (what the capture costs the cluster); default both")
	flag.Parse()
	var err error
	if cfg.size, err = dataset.ParseSize(*size); err != nil {
		return err
	}
	if cfg.valueBytes, err = dataset.ParseSize(*value); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var t tools
	if t.etcd, err = etcdbin.Path(ctx, cfg.version); err != nil {
		return err
	}
	if t.etcdctl, err = etcdbin.EtcdctlPath(ctx, cfg.version); err != nil {
		return err
	}
	if t.etcdutl, err = etcdbin.EtcdutlPath(ctx, cfg.version); err != nil {
		return err
	}
	if t.etcdmedic, err = buildEtcdmedic(ctx, cfg.out); err != nil {
		return err
	}
	started := time.Now()
	if err := os.MkdirAll(cfg.out, 0o755); err != nil {
		return err
	}
	if cfg.only != "cost" {
		res, err := measure(ctx, t, cfg)
		if err != nil {
			return err
		}
		report(os.Stdout, cfg, res)
	}
	if cfg.only != "backup" {
		res, err := captureCost(ctx, t, cfg)
		if err != nil {
			return err
		}
		reportCost(os.Stdout, cfg, res)
	}
	logf("done in %s", time.Since(started).Round(time.Second))
	return nil
}
