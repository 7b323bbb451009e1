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
	"strings"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcdmedic/etcdmedic/bench/internal/dataset"

	"github.com/etcdmedic/etcdmedic/internal/etcdtest"
)

// memberSpec is one member of the benchmark cluster; its URLs are fixed when the data set is
// built (they are in every data dir's membership).
type memberSpec struct {
	Name      string `json:"name"`
	ClientURL string `json:"clientURL"`
	PeerURL   string `json:"peerURL"`
}

// dataSet is a built cluster whose quorum was lost: three stopped data dirs under Golden,
// the member that was not killed first.
type dataSet struct {
	Version      string       `json:"version"`
	TargetBytes  int64        `json:"targetBytes"`
	ValueBytes   int64        `json:"valueBytes"`
	Keys         int64        `json:"keys"` // acknowledged before quorum was lost: all must be there after a recovery
	QuotaBytes   int64        `json:"quotaBytes"`
	Members      []memberSpec `json:"members"`
	Built        time.Time    `json:"built"`
	BuildSeconds float64      `json:"buildSeconds"`
	DataBytes    int64        `json:"dataBytes"` // of all three data dirs
	base         string
}

func (d *dataSet) golden() string { return filepath.Join(d.base, "golden") }

// flags are the flags every member runs with, on both sides.
func (d *dataSet) flags() []string {
	return []string{"--quota-backend-bytes=" + strconv.FormatInt(d.QuotaBytes, 10), "--initial-cluster-token=bench-recover"}
}

func (d *dataSet) initialCluster() string {
	var parts []string
	for _, m := range d.Members {
		parts = append(parts, m.Name+"="+m.PeerURL)
	}
	return strings.Join(parts, ",")
}

// startMember runs one member of the set on dataDir as a child in its own process group.
func (d *dataSet) startMember(etcd string, m memberSpec, dataDir string, extra ...string) (*exec.Cmd, <-chan error, error) {
	log, err := os.OpenFile(dataDir+".log", os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, nil, err
	}
	defer log.Close()
	args := append([]string{
		"--name=" + m.Name,
		"--data-dir=" + dataDir,
		"--listen-client-urls=" + m.ClientURL,
		"--advertise-client-urls=" + m.ClientURL,
		"--listen-peer-urls=" + m.PeerURL,
		"--initial-advertise-peer-urls=" + m.PeerURL,
		"--initial-cluster=" + d.initialCluster(),
		"--initial-cluster-state=new",
	}, d.flags()...)
	cmd := exec.Command(etcd, append(args, extra...)...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, nil, fmt.Errorf("start %s: %w", m.Name, err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	return cmd, done, nil
}

// ensureDataSet returns the data set of this size, building it unless a complete one is kept.
func ensureDataSet(ctx context.Context, t tools, cfg config, size int64) (*dataSet, error) {
	base := filepath.Join(cfg.out, fmt.Sprintf("%s-%s-value%s", cfg.version, dataset.FormatSize(size), dataset.FormatSize(cfg.valueBytes)))
	infoPath := filepath.Join(base, "set.json")
	set := &dataSet{base: base}
	if b, err := os.ReadFile(infoPath); err == nil {
		if err := json.Unmarshal(b, set); err != nil {
			return nil, fmt.Errorf("read %s (delete it to rebuild): %w", infoPath, err)
		}
		logf("reusing %s", base)
		return set, nil
	}
	if err := os.RemoveAll(base); err != nil {
		return nil, err
	}
	build := filepath.Join(base, "build")
	if err := os.MkdirAll(build, 0o755); err != nil {
		return nil, err
	}
	set.Version, set.TargetBytes, set.ValueBytes = cfg.version, size, cfg.valueBytes
	set.QuotaBytes = max(int64(4)<<30, 4*size)
	ports, err := dataset.FreePorts(6)
	if err != nil {
		return nil, err
	}
	for i := range 3 {
		set.Members = append(set.Members, memberSpec{
			Name:      fmt.Sprintf("m%d", i+1),
			ClientURL: fmt.Sprintf("http://127.0.0.1:%d", ports[2*i]),
			PeerURL:   fmt.Sprintf("http://127.0.0.1:%d", ports[2*i+1]),
		})
	}
	logf("building %s: 3 members of etcd %s, %s values until the db is %s", base, cfg.version, dataset.FormatSize(cfg.valueBytes), dataset.FormatSize(size))
	started := time.Now()
	if err := set.fill(ctx, t.etcd, build); err != nil {
		etcdtest.KillUnder(build)
		return nil, err
	}
	set.Built, set.BuildSeconds = time.Now().UTC(), time.Since(started).Seconds()
	if err := os.Rename(build, set.golden()); err != nil {
		return nil, err
	}
	set.DataBytes = treeBytes(set.golden())
	b, _ := json.MarshalIndent(set, "", "  ")
	if err := os.WriteFile(infoPath, append(b, '\n'), 0o644); err != nil {
		return nil, err
	}
	logf("built in %s: %d keys, %d MiB of data dirs", time.Since(started).Round(time.Second), set.Keys, set.DataBytes>>20)
	return set, nil
}

// fill starts the three members, writes until the db reaches the target size, then kills two
// (SIGKILL: quorum lost) and stops the third with SIGTERM.
func (d *dataSet) fill(ctx context.Context, etcd, dir string) error {
	var dones []<-chan error
	var cmds []*exec.Cmd
	for _, m := range d.Members {
		cmd, done, err := d.startMember(etcd, m, filepath.Join(dir, m.Name))
		if err != nil {
			return err
		}
		cmds, dones = append(cmds, cmd), append(dones, done)
	}
	var eps []string
	for _, m := range d.Members {
		eps = append(eps, m.ClientURL)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return err
	}
	defer cli.Close()
	if err := waitWritable(ctx, cli, 60*time.Second); err != nil {
		return err
	}
	filled, err := dataset.Fill(ctx, cli, filepath.Join(dir, d.Members[0].Name, "member", "snap", "db"), d.TargetBytes, d.ValueBytes, logf)
	d.Keys = filled.Keys
	if err != nil {
		return err
	}
	for i := 1; i < len(cmds); i++ {
		cmds[i].Process.Kill()
		<-dones[i]
	}
	cmds[0].Process.Signal(syscall.SIGTERM)
	select {
	case <-dones[0]:
	case <-time.After(30 * time.Second):
		return errors.New("the surviving member did not stop 30 s after SIGTERM")
	}
	return nil
}

// waitWritable waits until a put succeeds.
func waitWritable(ctx context.Context, cli *clientv3.Client, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := cli.Put(pctx, "bench/ready", "1")
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("the cluster took no write within %s: %v", timeout, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func treeBytes(root string) int64 {
	var n int64
	filepath.Walk(root, func(_ string, info os.FileInfo, err error) error {
		if err == nil && info.Mode().IsRegular() {
			n += info.Size()
		}
		return nil
	})
	return n
}
