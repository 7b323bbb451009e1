package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcdmedic/etcdmedic/history"
	"github.com/etcdmedic/etcdmedic/internal/etcdtest"
	"github.com/etcdmedic/etcdmedic/workload"
)

const (
	toolScript    = "manual script"
	toolEtcdmedic = "etcdmedic recover"
	// runTimeout bounds one recovery by either tool.
	runTimeout = 10 * time.Minute
)

// stepTime is how long one step took.
type stepTime struct {
	name string
	took time.Duration
}

// sample is one recovery by one tool.
type sample struct {
	wall  time.Duration
	steps []stepTime
	// outage is the longest time the workload's clients went without an acknowledged write:
	// from the quorum loss to the first write the repaired cluster took.
	outage time.Duration
}

// sizeResult is every run on one data set.
type sizeResult struct {
	set            *dataSet
	script, medic  []sample
	keysAfterEvery int64
}

// measure alternates the two tools on fresh copies of the data set, each from the incident's
// state: the member that was not killed runs alone, without quorum.
func measure(ctx context.Context, t tools, cfg config, set *dataSet) (sizeResult, error) {
	res := sizeResult{set: set, keysAfterEvery: set.Keys}
	for i := range 2 * cfg.runs {
		tool := toolScript
		if (i%2 == 0) == (i/2%2 == 1) { // script, medic, medic, script, script, medic, ...
			tool = toolEtcdmedic
		}
		s, err := runOnce(ctx, t, cfg, set, tool, i)
		if err != nil {
			return res, fmt.Errorf("%s, run %d: %w", tool, i+1, err)
		}
		logf("%s %s run %d: %s, write outage %s", dataSetName(set), tool, i/2+1, s.wall.Round(10*time.Millisecond), s.outage.Round(10*time.Millisecond))
		if tool == toolScript {
			res.script = append(res.script, s)
		} else {
			res.medic = append(res.medic, s)
		}
	}
	return res, nil
}

func dataSetName(set *dataSet) string { return filepath.Base(set.base) }

// runOnce prepares the incident on fresh copies, runs one tool, and checks that the cluster it
// leaves has every key that was acknowledged.
func runOnce(ctx context.Context, t tools, cfg config, set *dataSet, tool string, n int) (sample, error) {
	runDir := filepath.Join(set.base, fmt.Sprintf("run-%d", n+1))
	etcdtest.KillUnder(runDir)
	if err := os.RemoveAll(runDir); err != nil {
		return sample{}, err
	}
	if err := os.MkdirAll(runDir, 0o755); err != nil {
		return sample{}, err
	}
	defer func() {
		etcdtest.KillUnder(runDir)
		if !cfg.keep {
			os.RemoveAll(runDir)
		}
	}()
	var dirs []string
	for _, m := range set.Members {
		dir := filepath.Join(runDir, m.Name)
		if err := copyTree(ctx, filepath.Join(set.golden(), m.Name), dir); err != nil {
			return sample{}, err
		}
		dirs = append(dirs, dir)
	}
	// The incident starts on a disk with nothing left to write back, as a real cluster's: the
	// copies just made (6 GB at 1 GiB) would otherwise still be flushed while the tool runs,
	// and every fsync either tool makes (etcd's, and etcdmedic's backups) would wait behind
	// them (the survivor's 1 GiB backup took 3.4 s instead of 1.4 s).
	syscall.Sync()
	// The incident: the cluster runs, then two members are killed; the first stays up alone,
	// without quorum (a member restarted alone would never serve: it cannot publish itself).
	var w *workload.Workload
	if err := startIncident(ctx, t, set, dirs, func(eps []string) (err error) {
		w, err = workload.Start(ctx, eps, workload.Spec{Prefix: "/outage/", Clients: outageClients})
		return err
	}); err != nil {
		return sample{}, err
	}
	defer w.Stop()
	var s sample
	var err error
	started := time.Now()
	if tool == toolScript {
		s.steps, err = runScript(ctx, t, set, dirs, runDir)
	} else {
		s.steps, err = runEtcdmedic(ctx, t, set, dirs, runDir)
	}
	s.wall = time.Since(started)
	if err != nil {
		return s, err
	}
	if s.outage, err = judgeWorkload(ctx, w, set); err != nil {
		return s, err
	}
	return s, checkNothingLost(ctx, set)
}

// outageClients is how many workload clients measure the write outage: few, so that they
// barely load the recovery they time.
const outageClients = 2

// judgeWorkload lets the workload run a moment on the repaired cluster, stops it, checks its
// history (linearizable, nothing acknowledged lost) and returns its write outage.
func judgeWorkload(ctx context.Context, w *workload.Workload, set *dataSet) (time.Duration, error) {
	time.Sleep(time.Second)
	h := w.Stop()
	var eps []string
	for _, m := range set.Members {
		eps = append(eps, m.ClientURL)
	}
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := h.ReadFinal(rctx, eps, nil); err != nil {
		return 0, err
	}
	if v := history.Check(h); v.Result != history.Passed {
		return 0, fmt.Errorf("the workload's history: %s", v)
	}
	from, to := h.WriteOutage()
	return to.Sub(from), nil
}

// startIncident starts the three members on their copies, waits until the cluster takes a
// write, and kills the second and third.
// beforeKill runs on the healthy cluster, with its client URLs, just before the kill.
func startIncident(ctx context.Context, t tools, set *dataSet, dirs []string, beforeKill func(eps []string) error) error {
	var cmds []*exec.Cmd
	var dones []<-chan error
	for i, m := range set.Members {
		cmd, done, err := set.startMember(t.etcd, m, dirs[i])
		if err != nil {
			return err
		}
		cmds, dones = append(cmds, cmd), append(dones, done)
	}
	var eps []string
	for _, m := range set.Members {
		eps = append(eps, m.ClientURL)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return err
	}
	defer cli.Close()
	if err := waitWritable(ctx, cli, 2*time.Minute); err != nil {
		return err
	}
	if err := beforeKill(eps); err != nil {
		return err
	}
	time.Sleep(time.Second) // the workload's first second on the healthy cluster
	for i := 1; i < len(cmds); i++ {
		cmds[i].Process.Kill()
		<-dones[i]
	}
	return nil
}

// checkNothingLost counts the benchmark's keys on every member (serializable reads: each
// member's own data): at least every acknowledged one.
func checkNothingLost(ctx context.Context, set *dataSet) error {
	for _, m := range set.Members {
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{m.ClientURL}, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
		if err != nil {
			return err
		}
		gctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		resp, err := cli.Get(gctx, "/bench/", clientv3.WithPrefix(), clientv3.WithCountOnly(), clientv3.WithSerializable())
		cancel()
		cli.Close()
		if err != nil {
			return fmt.Errorf("count keys on %s: %w", m.Name, err)
		}
		// Writes in flight when the load stopped may be there too: never fewer than acknowledged.
		if resp.Count < set.Keys {
			return fmt.Errorf("%s has %d keys, fewer than the %d acknowledged", m.Name, resp.Count, set.Keys)
		}
	}
	return nil
}

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration{}, ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
