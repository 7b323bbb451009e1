package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcdmedic/etcdmedic/archive"
	"github.com/etcdmedic/etcdmedic/bench/internal/dataset"
	"github.com/etcdmedic/etcdmedic/internal/etcdtest"
	"github.com/etcdmedic/etcdmedic/store"
)

type result struct {
	dbBytes                   int64
	medicFull, manualFull     []time.Duration
	medicStored, manualStored int64
	lags                      []time.Duration
	ackedPerSec               float64
	medicRestore              []time.Duration // the full backup's point, no history
	medicPITR                 []time.Duration // the latest point: the load's history replayed
	replayed                  int64
	manualRestore             []time.Duration
}

// member is the one etcd the bench backs up.
type member struct {
	cmd          *exec.Cmd
	client, peer string
}

func startMember(etcd, dataDir string) (*member, error) {
	ports, err := dataset.FreePorts(2)
	if err != nil {
		return nil, err
	}
	m := &member{client: fmt.Sprintf("http://127.0.0.1:%d", ports[0]), peer: fmt.Sprintf("http://127.0.0.1:%d", ports[1])}
	log, err := os.OpenFile(dataDir+".log", os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer log.Close()
	m.cmd = exec.Command(etcd, "--name=m1", "--data-dir="+dataDir, "--listen-client-urls="+m.client, "--advertise-client-urls="+m.client,
		"--listen-peer-urls="+m.peer, "--initial-advertise-peer-urls="+m.peer, "--initial-cluster=m1="+m.peer, "--quota-backend-bytes=8589934592")
	m.cmd.Stdout, m.cmd.Stderr = log, log
	m.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	return m, m.cmd.Start()
}

func (m *member) stop() {
	m.cmd.Process.Signal(syscall.SIGTERM)
	m.cmd.Wait()
}

// ensureDataSet keeps one member's data dir filled to size under out, built once.
func ensureDataSet(ctx context.Context, t tools, cfg config) (string, error) {
	golden := filepath.Join(cfg.out, fmt.Sprintf("%s-%s-distinct", cfg.version, dataset.FormatSize(cfg.size)), "m1.etcd")
	if _, err := os.Stat(golden + ".done"); err == nil {
		logf("reusing %s", golden)
		return golden, nil
	}
	os.RemoveAll(golden)
	if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
		return "", err
	}
	m, err := startMember(t.etcd, golden)
	if err != nil {
		return "", err
	}
	defer m.stop()
	cli, err := client(m.client)
	if err != nil {
		return "", err
	}
	defer cli.Close()
	if _, err := dataset.FillDistinct(ctx, cli, filepath.Join(golden, "member", "snap", "db"), cfg.size, cfg.valueBytes, logf); err != nil {
		return "", err
	}
	return golden, os.WriteFile(golden+".done", nil, 0o644)
}

func client(ep string) (*clientv3.Client, error) {
	return clientv3.New(clientv3.Config{Endpoints: []string{ep}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
}

func timed(f func() error) (time.Duration, error) {
	start := time.Now()
	err := f()
	return time.Since(start), err
}

func runCmd(ctx context.Context, name string, args ...string) error {
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %v: %v\n%s", filepath.Base(name), args, err, out.String())
	}
	return nil
}

func measure(ctx context.Context, t tools, cfg config) (*result, error) {
	golden, err := ensureDataSet(ctx, t, cfg)
	if err != nil {
		return nil, err
	}
	work, err := os.MkdirTemp(cfg.out, "run-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(work)
	data := filepath.Join(work, "m1.etcd")
	if err := runCmd(ctx, "cp", "-a", "--reflink=auto", golden, data); err != nil {
		return nil, err
	}
	m, err := startMember(t.etcd, data)
	if err != nil {
		return nil, err
	}
	defer m.stop()
	cli, err := client(m.client)
	if err != nil {
		return nil, err
	}
	defer cli.Close()
	st, err := cli.Status(ctx, m.client)
	for i := 0; err != nil && i < 100; i++ {
		time.Sleep(200 * time.Millisecond)
		st, err = cli.Status(ctx, m.client)
	}
	if err != nil {
		return nil, err
	}
	res := &result{dbBytes: st.DbSize}
	s3, err := etcdtest.NewS3(filepath.Join(work, "s3"))
	if s3 != nil {
		defer s3.Stop()
	}
	if err != nil {
		return nil, err
	}
	medicURL := s3.URL("etcdmedic")
	manual, err := store.Open(ctx, s3.URL("manual"), store.Options{})
	if err != nil {
		return nil, err
	}
	defer manual.Close()
	snap := filepath.Join(work, "snapshot.db")
	// SeaweedFS grows its volumes on the first large writes: a snapshot's worth is uploaded
	// and dropped before anything is timed, and the order of the two tools alternates.
	if err := runCmd(ctx, t.etcdctl, "snapshot", "save", snap, "--endpoints", m.client); err != nil {
		return nil, err
	}
	for i := 0; i < 2; i++ {
		if _, err := manual.PutRaw(ctx, fmt.Sprintf("warmup/%d.db", i), snap); err != nil {
			return nil, err
		}
	}
	medicFull := func() error {
		return runCmd(ctx, t.etcdmedic, "backup", "now", "--store", medicURL, "--endpoints", m.client)
	}
	manualFull := func(i int) func() error {
		return func() error {
			os.Remove(snap)
			if err := runCmd(ctx, t.etcdctl, "snapshot", "save", snap, "--endpoints", m.client); err != nil {
				return err
			}
			n, err := manual.PutRaw(ctx, fmt.Sprintf("snapshots/%d.db", i), snap)
			res.manualStored = n
			return err
		}
	}
	for i := 0; i < cfg.runs; i++ {
		logf("full backup, run %d of %d", i+1, cfg.runs)
		first, second := &res.medicFull, &res.manualFull
		f1, f2 := medicFull, manualFull(i)
		if i%2 == 1 {
			first, second, f1, f2 = second, first, f2, f1
		}
		for _, step := range []struct {
			into *[]time.Duration
			f    func() error
		}{{first, f1}, {second, f2}} {
			d, err := timed(step.f)
			if err != nil {
				return nil, err
			}
			*step.into = append(*step.into, d)
		}
	}
	medic, err := store.Open(ctx, medicURL, store.Options{})
	if err != nil {
		return nil, err
	}
	defer medic.Close()
	entries, err := archive.List(ctx, medic)
	if err != nil || len(entries) == 0 {
		return nil, fmt.Errorf("list etcdmedic's backups: %v", err)
	}
	last := entries[len(entries)-1]
	res.medicStored = last.Data.StoredBytes

	if err := recoveryPoint(ctx, cfg, cli, medic, last.Generation, last.Revision, res); err != nil {
		return nil, err
	}

	for i := 0; i < cfg.runs; i++ {
		logf("restore, run %d of %d", i+1, cfg.runs)
		for _, c := range []struct {
			into  *[]time.Duration
			extra []string
		}{{&res.medicRestore, []string{"--to-revision", fmt.Sprint(last.Revision)}}, {&res.medicPITR, nil}} {
			dir := filepath.Join(work, fmt.Sprintf("restore-%d-%d", i, len(*c.into)))
			args := append([]string{"restore", "--store", medicURL, "--data-dir", "m1=" + dir, "--etcdutl", t.etcdutl, "--etcd-command", t.etcd}, c.extra...)
			d, err := timed(func() error { return runCmd(ctx, t.etcdmedic, args...) })
			if err != nil {
				return nil, err
			}
			*c.into = append(*c.into, d)
			os.RemoveAll(dir)
		}
		dir := filepath.Join(work, fmt.Sprintf("restore-manual-%d", i))
		d, err := timed(func() error {
			return runCmd(ctx, t.etcdutl, "snapshot", "restore", snap, "--data-dir", dir, "--name", "m1", "--initial-cluster", "m1="+m.peer, "--initial-advertise-peer-urls", m.peer)
		})
		if err != nil {
			return nil, err
		}
		res.manualRestore = append(res.manualRestore, d)
		os.RemoveAll(dir)
	}
	return res, nil
}

// recoveryPoint writes at cfg.rate for cfg.loadSeconds with 16 clients while the history is
// captured into st every second, and records for each acknowledged write how long after its
// acknowledgement its revision was in the store.
func recoveryPoint(ctx context.Context, cfg config, cli *clientv3.Client, st *store.Store, gen archive.Generation, from int64, res *result) error {
	logf("recovery point: %d writes/s asked for %d s, history stored every second", cfg.rate, cfg.loadSeconds)
	type stored struct {
		to int64
		at time.Time
	}
	var mu sync.Mutex
	var segs []stored
	cctx, stopCapture := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := archive.Capture(cctx, cli, st, gen, from, time.Second, func(s archive.Segment, _ time.Time) {
			mu.Lock()
			segs = append(segs, stored{s.To, time.Now()})
			mu.Unlock()
		})
		done <- err
	}()
	type ack struct {
		rev int64
		at  time.Time
	}
	var acks []ack
	var amu sync.Mutex
	var n atomic.Int64
	end := time.Now().Add(time.Duration(cfg.loadSeconds) * time.Second)
	var wg sync.WaitGroup
	const clients = 16
	interval := time.Duration(int64(time.Second) * clients / int64(cfg.rate))
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tick := time.NewTicker(interval)
			defer tick.Stop()
			for time.Now().Before(end) && ctx.Err() == nil {
				<-tick.C
				i := n.Add(1)
				resp, err := cli.Put(ctx, fmt.Sprintf("/bench/load/%09d", i), "v")
				if err != nil {
					continue
				}
				amu.Lock()
				acks = append(acks, ack{resp.Header.Revision, time.Now()})
				amu.Unlock()
			}
		}()
	}
	wg.Wait()
	res.ackedPerSec = float64(len(acks)) / float64(cfg.loadSeconds)
	var maxRev int64
	for _, a := range acks {
		maxRev = max(maxRev, a.rev)
	}
	for i := 0; i < 200; i++ {
		mu.Lock()
		reached := len(segs) > 0 && segs[len(segs)-1].to >= maxRev
		mu.Unlock()
		if reached {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	stopCapture()
	<-done
	mu.Lock()
	defer mu.Unlock()
	for _, a := range acks {
		i := sort.Search(len(segs), func(i int) bool { return segs[i].to >= a.rev })
		if i == len(segs) {
			return fmt.Errorf("revision %d was never stored", a.rev)
		}
		res.lags = append(res.lags, segs[i].at.Sub(a.at))
	}
	res.replayed = maxRev - from
	return nil
}
