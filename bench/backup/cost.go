package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdmedic/etcdmedic/internal/etcdtest"
)

// costWindow is one window of write load on a fresh member, with or without backup run.
type costWindow struct {
	capture     bool
	rate        int // writes a second asked (0: as fast as the writers go)
	perSec      float64
	latencies   []time.Duration
	etcdCPU     time.Duration // the member's CPU time over the window
	captureCPU  time.Duration // backup run's
	acknowledge int
}

// costResult are the windows, by rate and capture.
type costResult struct{ windows []costWindow }

// captureCost measures what the continuous capture costs the cluster: 16 writers put 256-byte
// values into a fresh member for cfg.costSeconds, at cfg.rate and then as fast as they go,
// alternately without and with `etcdmedic backup run` (a full backup, then the history stored
// every second into the S3 bucket) beside it, cfg.runs times each. Everything shares this
// machine's two cores, so the throughput lost is an upper bound; the member's own CPU time per
// write is what the watch costs the cluster wherever backup run runs.
func captureCost(ctx context.Context, t tools, cfg config) (*costResult, error) {
	work, err := os.MkdirTemp(cfg.out, "cost-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(work)
	s3, err := etcdtest.NewS3(filepath.Join(work, "s3"))
	if s3 != nil {
		defer s3.Stop()
	}
	if err != nil {
		return nil, err
	}
	res := &costResult{}
	for run := 0; run < cfg.runs; run++ {
		for _, rate := range []int{cfg.rate, 0} {
			for _, capture := range []bool{run%2 == 1, run%2 == 0} { // alternate which goes first
				w, err := costOnce(ctx, t, cfg, s3.URL(fmt.Sprintf("cost-%d-%d-%v", run, rate, capture)), filepath.Join(work, fmt.Sprintf("m-%d-%d-%v.etcd", run, rate, capture)), rate, capture)
				if err != nil {
					return nil, err
				}
				logf("capture cost: rate %d, capture %v: %.0f writes/s, p99 %s, etcd CPU %s, backup run CPU %s", rate, capture, w.perSec, percentile(w.latencies, 0.99), w.etcdCPU, w.captureCPU)
				res.windows = append(res.windows, *w)
			}
		}
	}
	return res, nil
}

func costOnce(ctx context.Context, t tools, cfg config, storeURL, dataDir string, rate int, capture bool) (*costWindow, error) {
	m, err := startMember(t.etcd, dataDir)
	if err != nil {
		return nil, err
	}
	defer m.stop()
	cli, err := client(m.client)
	if err != nil {
		return nil, err
	}
	defer cli.Close()
	for i := 0; i < 100; i++ {
		if _, err = cli.Status(ctx, m.client); err == nil {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err != nil {
		return nil, err
	}
	w := &costWindow{capture: capture, rate: rate}
	var run *exec.Cmd
	if capture {
		run = exec.CommandContext(ctx, t.etcdmedic, "backup", "run", "--store", storeURL, "--endpoints", m.client, "--segment", "1s")
		run.Stdout, run.Stderr = io.Discard, io.Discard
		if err := run.Start(); err != nil {
			return nil, err
		}
		defer func() { run.Process.Kill(); run.Wait() }()
		time.Sleep(3 * time.Second) // its full backup of the empty member, then the watch
	}
	etcdBefore, _ := cpuTime(m.cmd.Process.Pid)
	var runBefore time.Duration
	if run != nil {
		runBefore, _ = cpuTime(run.Process.Pid)
	}
	w.latencies = load(ctx, cli, rate, time.Duration(cfg.costSeconds)*time.Second)
	w.acknowledge = len(w.latencies)
	w.perSec = float64(len(w.latencies)) / float64(cfg.costSeconds)
	etcdAfter, _ := cpuTime(m.cmd.Process.Pid)
	w.etcdCPU = etcdAfter - etcdBefore
	if run != nil {
		after, _ := cpuTime(run.Process.Pid)
		w.captureCPU = after - runBefore
	}
	return w, nil
}

// load runs 16 writers for d, at rate writes a second in all (0: as fast as they go), and
// returns the latency of each acknowledged write.
func load(ctx context.Context, cli *clientv3.Client, rate int, d time.Duration) []time.Duration {
	const clients = 16
	var mu sync.Mutex
	var lat []time.Duration
	var n atomic.Int64
	value := strings.Repeat("v", 256)
	end := time.Now().Add(d)
	var wg sync.WaitGroup
	for c := 0; c < clients; c++ {
		wg.Go(func() {
			var tick <-chan time.Time
			if rate > 0 {
				t := time.NewTicker(time.Duration(int64(time.Second) * clients / int64(rate)))
				defer t.Stop()
				tick = t.C
			}
			for time.Now().Before(end) && ctx.Err() == nil {
				if tick != nil {
					<-tick
				}
				start := time.Now()
				if _, err := cli.Put(ctx, fmt.Sprintf("/bench/cost/%09d", n.Add(1)), value); err != nil {
					continue
				}
				mu.Lock()
				lat = append(lat, time.Since(start))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return lat
}

// cpuTime is a process's user and system CPU time so far (from /proc/<pid>/stat).
func cpuTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:]) // after the command name
	if len(fields) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(fields))
	}
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	const ticksPerSecond = 100 // USER_HZ on Linux
	return time.Duration(utime+stime) * time.Second / ticksPerSecond, nil
}
