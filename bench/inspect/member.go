package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcdmedic/etcdmedic/bench/internal/dataset"
)

const (
	// readyTimeout bounds the wait for the new member to serve.
	readyTimeout = 30 * time.Second
	// stopGrace is how long a SIGTERMed etcd may take to exit before it is killed (and the
	// data dir discarded).
	stopGrace = 20 * time.Second
	// purgeWait covers one round of etcd's WAL purge (every 30 s), which keeps 5 segments
	// once a snapshot has released the older ones: a member that ran a while looks so.
	purgeWait = 35 * time.Second
	maxWALs   = 5
)

// dataDirInfo is what was built, kept next to the data dir; its presence marks a complete
// build that later runs reuse.
type dataDirInfo struct {
	Version      string    `json:"version"`
	TargetBytes  int64     `json:"target_bytes"`
	ValueBytes   int64     `json:"value_bytes"`
	Keys         int64     `json:"keys"`
	WrittenBytes int64     `json:"written_bytes"`
	Built        time.Time `json:"built"`
	BuildSeconds float64   `json:"build_seconds"`
}

// ensureDataDir returns the etcd data dir of a stopped member with a db of about size bytes,
// and how it was built, building it under cfg.out unless a complete one is there.
func ensureDataDir(ctx context.Context, etcd string, cfg config, size int64) (string, dataDirInfo, error) {
	base := filepath.Join(cfg.out, fmt.Sprintf("%s-%s-value%s", cfg.version, dataset.FormatSize(size), dataset.FormatSize(cfg.valueBytes)))
	dataDir := filepath.Join(base, "data")
	infoPath := filepath.Join(base, "built.json")
	var info dataDirInfo
	if b, err := os.ReadFile(infoPath); err == nil {
		if err := json.Unmarshal(b, &info); err != nil {
			return "", info, fmt.Errorf("read %s (delete it to rebuild): %w", infoPath, err)
		}
		logf("reusing %s", dataDir)
		return dataDir, info, nil
	}
	if err := os.RemoveAll(base); err != nil {
		return "", info, fmt.Errorf("clear incomplete build %s: %w", base, err)
	}
	if err := os.MkdirAll(base, 0o755); err != nil {
		return "", info, err
	}
	logf("building %s: etcd %s, %s values until the db is %s", dataDir, cfg.version, dataset.FormatSize(cfg.valueBytes), dataset.FormatSize(size))
	started := time.Now()
	info, err := fillMember(ctx, etcd, cfg, base, dataDir, size)
	if err != nil {
		return "", info, err
	}
	info.Built, info.BuildSeconds = time.Now().UTC(), time.Since(started).Seconds()
	b, _ := json.MarshalIndent(info, "", "  ")
	if err := os.WriteFile(infoPath, append(b, '\n'), 0o644); err != nil {
		return "", info, err
	}
	logf("built %s in %s: %d keys", dataDir, time.Since(started).Round(time.Second), info.Keys)
	return dataDir, info, nil
}

// fillMember starts a single-member cluster on dataDir, writes until the db reaches size,
// lets the WAL purge settle, and stops the member with SIGTERM.
func fillMember(ctx context.Context, etcd string, cfg config, base, dataDir string, size int64) (dataDirInfo, error) {
	info := dataDirInfo{Version: cfg.version, TargetBytes: size, ValueBytes: cfg.valueBytes}
	ports, err := dataset.FreePorts(2)
	if err != nil {
		return info, err
	}
	clientURL := "http://127.0.0.1:" + strconv.Itoa(ports[0])
	peerURL := "http://127.0.0.1:" + strconv.Itoa(ports[1])
	quota := max(int64(4)<<30, 2*size)
	logFile, err := os.Create(filepath.Join(base, "etcd.log"))
	if err != nil {
		return info, err
	}
	defer logFile.Close()
	cmd := exec.Command(etcd,
		"--name=bench",
		"--data-dir="+dataDir,
		"--listen-client-urls="+clientURL,
		"--advertise-client-urls="+clientURL,
		"--listen-peer-urls="+peerURL,
		"--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=bench="+peerURL,
		"--initial-cluster-state=new",
		"--initial-cluster-token=bench-inspect",
		"--quota-backend-bytes="+strconv.FormatInt(quota, 10),
		"--logger=zap",
		"--log-outputs=stderr",
	)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Own process group; killed with us if we die first.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return info, fmt.Errorf("start etcd: %w", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	stopped := false
	defer func() {
		if !stopped {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
	}()

	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{clientURL}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return info, err
	}
	defer cli.Close()
	if err := waitReady(ctx, cli, clientURL, done); err != nil {
		return info, err
	}
	filled, err := dataset.Fill(ctx, cli, filepath.Join(dataDir, "member", "snap", "db"), size, cfg.valueBytes, logf)
	info.Keys, info.WrittenBytes = filled.Keys, filled.WrittenBytes
	if err != nil {
		return info, err
	}
	settleWAL(ctx, filepath.Join(dataDir, "member", "wal"))

	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
	select {
	case err := <-done:
		stopped = true
		var exit *exec.ExitError
		if err != nil && !errors.As(err, &exit) {
			return info, fmt.Errorf("stop etcd: %w", err)
		}
	case <-time.After(stopGrace):
		return info, fmt.Errorf("etcd did not exit %s after SIGTERM; see %s", stopGrace, logFile.Name())
	}
	return info, nil
}

func waitReady(ctx context.Context, cli *clientv3.Client, endpoint string, exited <-chan error) error {
	deadline := time.Now().Add(readyTimeout)
	for time.Now().Before(deadline) {
		sctx, cancel := context.WithTimeout(ctx, time.Second)
		_, err := cli.Status(sctx, endpoint)
		cancel()
		if err == nil {
			return nil
		}
		select {
		case err := <-exited:
			return fmt.Errorf("etcd exited before serving: %v", err)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return fmt.Errorf("etcd not serving on %s after %s", endpoint, readyTimeout)
}

// settleWAL waits for one WAL purge while the member has more segments than etcd keeps, so
// the data dir is the steady state of a member that ran a while rather than one cut off
// mid-purge. Segments no snapshot has released stay: then it waits purgeWait and moves on.
func settleWAL(ctx context.Context, walDir string) {
	deadline := time.Now().Add(purgeWait)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		segs, _ := filepath.Glob(filepath.Join(walDir, "*.wal"))
		if len(segs) <= maxWALs {
			return
		}
		time.Sleep(time.Second)
	}
}
