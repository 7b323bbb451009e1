// Package staticpod runs a member as a kubeadm static pod: kubelet starts etcd from the
// manifest in its manifests folder. Stopping a member moves its manifest out of that folder
// (kubelet then stops the pod); starting writes it back with the flags the step needs. Only
// the flags etcdmedic manages change (--initial-cluster, --initial-cluster-state,
// --force-new-cluster); every other line stays byte for byte, and the original manifest is
// backed up before the first edit.
package staticpod

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/etcdmedic/etcdmedic/backup"
	"github.com/etcdmedic/etcdmedic/cluster"
	"github.com/etcdmedic/etcdmedic/runtime"
	"github.com/etcdmedic/etcdmedic/runtime/local"
)

// Runtime is one node's etcd static pod.
type Runtime struct {
	// Manifest is the manifest's path in kubelet's manifests folder.
	Manifest string
	// Wait bounds how long kubelet may take to start or stop the pod.
	Wait time.Duration
}

// StoppedPath is where the manifest waits while the member is stopped: beside the manifests
// folder (kubelet would run any file inside it).
func (r Runtime) StoppedPath() string {
	return filepath.Join(filepath.Dir(filepath.Dir(r.Manifest)), "etcdmedic-stopped", filepath.Base(r.Manifest))
}

// BackupPath keeps the manifest as it was before etcdmedic first changed it.
func (r Runtime) BackupPath() string {
	return filepath.Join(filepath.Dir(filepath.Dir(r.Manifest)), "etcdmedic-backup", filepath.Base(r.Manifest))
}

func (r Runtime) wait() time.Duration {
	if r.Wait == 0 {
		return 2 * time.Minute
	}
	return r.Wait
}

// current returns the manifest wherever it is now.
func (r Runtime) current() ([]byte, error) {
	if b, err := os.ReadFile(r.Manifest); err == nil {
		return b, nil
	}
	b, err := os.ReadFile(r.StoppedPath())
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("no etcd manifest at %s (nor stopped at %s): the node needs kubeadm join --control-plane first", r.Manifest, r.StoppedPath())
	}
	return b, err
}

func (r Runtime) backupOnce() error {
	if _, err := os.Stat(r.BackupPath()); err == nil {
		return nil
	}
	b, err := r.current()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(r.BackupPath()), 0o700); err != nil {
		return err
	}
	return writeAtomic(r.BackupPath(), b)
}

// Check reads the manifest (in kubelet's folder, or where Stop put it) and makes sure etcdmedic
// can run the member through it: YAML with an etcd container whose --data-dir is dataDir, and
// whose flags can be edited. It changes nothing.
func (r Runtime) Check(dataDir string) error {
	b, err := r.load(dataDir)
	if err != nil {
		return err
	}
	if _, err := EditFlags(b, map[string]string{"initial-cluster": "check=http://127.0.0.1:1", "initial-cluster-state": "existing"}, true); err != nil {
		return fmt.Errorf("%s cannot be edited: %w", r.Manifest, err)
	}
	return nil
}

// load reads the manifest wherever it is now and checks that it runs etcd on dataDir.
func (r Runtime) load(dataDir string) ([]byte, error) {
	b, err := r.current()
	if err != nil {
		return nil, err
	}
	flags, err := cluster.EtcdFlagsFromManifest(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", r.Manifest, err)
	}
	if dd := flags["data-dir"]; dd != "" && !local.SamePath(dd, dataDir) {
		return nil, fmt.Errorf("%s runs etcd on %s, not on %s", r.Manifest, dd, dataDir)
	}
	return b, nil
}

// Stop moves the manifest out of kubelet's folder and waits until etcd is gone, and stays gone
// for stopSettle.
func (r Runtime) Stop(ctx context.Context, m runtime.MemberSpec) error {
	if err := r.backupOnce(); err != nil {
		return err
	}
	if _, err := os.Stat(r.Manifest); err == nil {
		if err := os.MkdirAll(filepath.Dir(r.StoppedPath()), 0o700); err != nil {
			return err
		}
		if err := os.Rename(r.Manifest, r.StoppedPath()); err != nil {
			return err
		}
		// Durable: after a power cut kubelet must not find the manifest back and start etcd.
		if err := backup.SyncDir(filepath.Dir(r.StoppedPath())); err != nil {
			return err
		}
		if err := backup.SyncDir(filepath.Dir(r.Manifest)); err != nil {
			return err
		}
	}
	return r.waitFor(ctx, m.DataDir, false)
}

// Start writes the manifest back with the member's bootstrap flags and waits until kubelet
// has started etcd.
func (r Runtime) Start(ctx context.Context, m runtime.MemberSpec) error {
	if err := r.backupOnce(); err != nil {
		return err
	}
	b, err := r.load(m.DataDir)
	if err != nil {
		return err
	}
	set := map[string]string{"initial-cluster": m.InitialCluster, "initial-cluster-state": m.ClusterState}
	force := slices.Contains(m.ExtraFlags, "--force-new-cluster")
	edited, err := EditFlags(b, set, force)
	if err != nil {
		return err
	}
	if err := writeAtomic(r.Manifest, edited); err != nil {
		return err
	}
	if err := os.Remove(r.StoppedPath()); err == nil {
		backup.SyncDir(filepath.Dir(r.StoppedPath()))
	}
	return r.waitFor(ctx, m.DataDir, true)
}

// stopSettle is how long etcd must stay gone once its manifest has left kubelet's folder. A
// kubelet that read the manifest just before it moved can still restart a crash-looping etcd
// from what it read, and kills it once it sees the manifest gone: a stop that returned at the
// first look without a process left apply to find that one running (CI-110, a master whose
// etcd crash-looped on a broken manifest).
const stopSettle = time.Second

// waitFor waits until etcd runs on dataDir (running), or until it is gone and has stayed gone
// for stopSettle.
func (r Runtime) waitFor(ctx context.Context, dataDir string, running bool) error {
	deadline := time.Now().Add(r.wait())
	var goneSince time.Time
	for {
		_, _, ok := local.FindProcess(dataDir)
		switch {
		case running && ok:
			return nil
		case running, ok:
			goneSince = time.Time{}
		case goneSince.IsZero():
			goneSince = time.Now()
		case time.Since(goneSince) >= stopSettle:
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("kubelet did not %s etcd on %s within %s", map[bool]string{true: "start", false: "stop"}[running], dataDir, r.wait())
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

var flagLine = regexp.MustCompile(`^(\s*-\s+)--?([a-z0-9-]+)(=(.*))?\s*$`)

// EditFlags sets flags in an etcd static pod manifest's command list, adds --force-new-cluster
// or removes it, and leaves every other line as it was. A flag it sets written as two items
// (- --initial-cluster, then - VALUE) is refused: rewriting one item would leave the other as
// an argument etcd refuses. The result must parse by etcd's rules and say what was set.
func EditFlags(manifest []byte, set map[string]string, force bool) ([]byte, error) {
	lines := strings.SplitAfter(string(manifest), "\n")
	done := map[string]bool{}
	var out []string
	indent, etcdLine := "", -1
	for _, l := range lines {
		body := strings.TrimRight(l, "\n")
		if m := flagLine.FindStringSubmatch(body); m != nil {
			name := m[2]
			indent = m[1]
			if name == "force-new-cluster" {
				continue // re-added below when wanted
			}
			if _, ok := set[name]; ok && m[3] == "" {
				return nil, fmt.Errorf("--%s and its value are two items of the etcd command; write them as one item (- --%s=VALUE) so that etcdmedic can edit it", name, name)
			}
			if v, ok := set[name]; ok {
				out = append(out, m[1]+"--"+name+"="+v+"\n")
				done[name] = true
				continue
			}
		} else if strings.TrimSpace(body) == "- etcd" {
			etcdLine = len(out)
			indent = body[:strings.Index(body, "-")] + "- "
		}
		out = append(out, l)
	}
	if etcdLine < 0 {
		return nil, errors.New("the manifest has no \"- etcd\" command line to edit")
	}
	var add []string
	for _, name := range []string{"initial-cluster", "initial-cluster-state"} {
		if v, ok := set[name]; ok && !done[name] {
			add = append(add, indent+"--"+name+"="+v+"\n")
		}
	}
	if force {
		add = append(add, indent+"--force-new-cluster\n")
	}
	out = append(out[:etcdLine+1], append(add, out[etcdLine+1:]...)...)
	edited := []byte(strings.Join(out, ""))
	flags, err := cluster.EtcdFlagsFromManifest(edited)
	if err != nil {
		return nil, fmt.Errorf("the edited manifest does not parse: %w", err)
	}
	for name, v := range set {
		if flags[name] != v {
			return nil, fmt.Errorf("the edited manifest has --%s=%q, want %q", name, flags[name], v)
		}
	}
	if forced := flags["force-new-cluster"] == "true"; forced != force {
		return nil, fmt.Errorf("the edited manifest has --force-new-cluster=%q, want %v", flags["force-new-cluster"], force)
	}
	return edited, nil
}

func writeAtomic(path string, b []byte) error {
	// A hidden temporary file: kubelet ignores names starting with a dot.
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".etcdmedic-tmp")
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	f, err := os.Open(tmp)
	if err == nil {
		f.Sync()
		f.Close()
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	return backup.SyncDir(filepath.Dir(path))
}
