package recovery

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/etcdmedic/etcdmedic"

	"github.com/etcdmedic/etcdmedic/backup"
	"github.com/etcdmedic/etcdmedic/datadir"
	"github.com/etcdmedic/etcdmedic/guard"
	"github.com/etcdmedic/etcdmedic/plan"
	"github.com/etcdmedic/etcdmedic/runtime"
)

// SnapshotOptions rebuild the survivor from a snapshot file (etcdctl snapshot save) rather
// than from its own data: for when every member's data is damaged, or the operator wants a
// known point in time.
type SnapshotOptions struct {
	Path    string
	Etcdutl string // the etcdutl of the cluster's etcd version
	// BumpRevision and MarkCompacted are etcdutl snapshot restore's: Kubernetes watchers and
	// informers must not see revisions go back (or be served stale ones) after a restore.
	BumpRevision  uint64
	MarkCompacted bool
}

// SnapshotSource is the snapshot a plan restores, as checked when the plan was made.
type SnapshotSource struct {
	Path          string              `json:"path"`
	SHA256        string              `json:"sha256"`
	Bytes         int64               `json:"bytes"`
	Revision      int64               `json:"revision"`
	ClusterID     etcdmedic.ClusterID `json:"clusterID,omitempty"`
	Etcdutl       string              `json:"etcdutl"`
	BumpRevision  uint64              `json:"bumpRevision,omitempty"`
	MarkCompacted bool                `json:"markCompacted,omitempty"`
}

func (s *SnapshotSource) bumpNote() string {
	switch {
	case s.BumpRevision > 0 && s.MarkCompacted:
		return fmt.Sprintf(", bumped by %d and marked compacted", s.BumpRevision)
	case s.BumpRevision > 0:
		return fmt.Sprintf(", bumped by %d", s.BumpRevision)
	}
	return ""
}

func newSnapshotSource(o SnapshotOptions, survivor Candidate) (*SnapshotSource, error) {
	if o.MarkCompacted && o.BumpRevision == 0 {
		return nil, errors.New("--mark-compacted needs --bump-revision (etcdutl snapshot restore refuses it alone)")
	}
	path, err := filepath.Abs(o.Path)
	if err != nil {
		return nil, err
	}
	r, err := datadir.Inspect(path, datadir.Options{})
	if err != nil {
		return nil, fmt.Errorf("--from-snapshot %s is not a snapshot (etcdctl snapshot save writes a bbolt db): %w", o.Path, err)
	}
	if r.Kind != datadir.KindDBFile || r.Backend == nil {
		return nil, fmt.Errorf("--from-snapshot %s is not a snapshot (a bare bbolt db): %s", o.Path, r.KindReason)
	}
	// Every member will be rebuilt from it: every page must be sound.
	if pc, err := datadir.CheckPages(path); err != nil {
		return nil, fmt.Errorf("--from-snapshot %s: its pages cannot be checked: %w", o.Path, err)
	} else if len(pc.Errors) > 0 {
		return nil, fmt.Errorf("--from-snapshot %s has damaged pages (%d problems, first: %s): every member would get them", o.Path, max(pc.ErrorCount, len(pc.Errors)), pc.Errors[0])
	}
	etcdutl := o.Etcdutl
	if etcdutl == "" {
		etcdutl = "etcdutl"
	}
	if etcdutl, err = exec.LookPath(etcdutl); err != nil {
		return nil, fmt.Errorf("--from-snapshot needs etcdutl of the cluster's etcd version (--etcdutl PATH): %w", err)
	}
	sum, err := backup.FileSHA256(path)
	if err != nil {
		return nil, err
	}
	src := &SnapshotSource{Path: path, SHA256: sum, Bytes: r.Backend.FileBytes, Revision: r.Backend.Revision, Etcdutl: etcdutl, BumpRevision: o.BumpRevision, MarkCompacted: o.MarkCompacted}
	if r.Identity != nil {
		src.ClusterID = r.Identity.ClusterID
	}
	return src, nil
}

// restoreSnapshot rebuilds the survivor from the plan's snapshot: the snapshot is checked
// against the plan, restored into a folder beside the data dir, the old data is quarantined
// (its checksums are the backup's), the restored member moves in, and the survivor starts as a
// one-member cluster. Run again, it goes on from wherever it stopped.
func (a *Applier) restoreSnapshot(ctx context.Context, survivor PlanMember, rep *Report) error {
	src := a.Plan.FromSnapshot
	restoredID, err := a.restoredClusterID()
	if err != nil {
		return err
	}
	r, err := datadir.Inspect(survivor.DataDir, datadir.Options{WALDir: survivor.WALDir})
	switch {
	case errors.Is(err, datadir.ErrLocked):
		// Running: the restored member started by an earlier run (the restore's cluster ID),
		// or the old survivor or any other etcd, which must not be.
		if id := a.liveClusterID(ctx, survivor); id != restoredID {
			return fmt.Errorf("an etcd runs on %s's data dir (cluster %s, not the restore's %s): stop it, then apply again", survivor.Name, id, restoredID)
		}
		return a.waitWrites(ctx, survivor)
	case err == nil && r.Identity != nil && r.Identity.ClusterID == restoredID:
		a.say("%s's data dir already holds the restored member (cluster %s)", survivor.Name, r.Identity.ClusterID)
	case err == nil && r.Identity != nil && r.Identity.ClusterID != a.Plan.ClusterID:
		return fmt.Errorf("%w: %s's data dir holds data of cluster %s, neither the plan's %s nor the restore's %s; nothing was changed: put the survivor's data back, or make a new plan", ErrStale, survivor.Name, r.Identity.ClusterID, a.Plan.ClusterID, restoredID)
	default:
		restored := strings.TrimRight(survivor.DataDir, "/") + ".etcdmedic-restore"
		if err := a.restoreBeside(ctx, survivor, restored); err != nil {
			return err
		}
		// The old data, readable or not, is moved aside (its checksums are the backup's) before
		// the restored member takes its place.
		if !isMissingOrEmpty(survivor.DataDir) {
			var man backupManifest
			_ = backup.ReadJSON(filepath.Join(a.Plan.BackupDir, survivor.Name, "manifest.json"), &man)
			why := guard.Reason{Class: guard.Removed, Why: "replaced by the restore of " + src.Path + " in a quorum-loss recovery"}
			q, err := guard.QuarantineKnown(survivor.DataDir, r, why, time.Now(), man.Files, filepath.Join(a.Plan.BackupDir, survivor.Name))
			if err != nil {
				return err
			}
			a.say("%s's old data quarantined in %s", survivor.Name, q.Dir)
			rep.Quarantines = append(rep.Quarantines, q.Dir)
		}
		if err := backup.MkdirAllSynced(survivor.DataDir); err != nil {
			return err
		}
		if err := moveRestoredWAL(survivor); err != nil {
			return err
		}
		if err := os.Rename(filepath.Join(restored, "member"), filepath.Join(survivor.DataDir, "member")); err != nil {
			return fmt.Errorf("move the restored member into %s: %w", survivor.DataDir, err)
		}
		// Both folders' entries must survive a power cut before etcd starts on the data dir.
		if err := backup.SyncDir(survivor.DataDir); err != nil {
			return err
		}
		if err := backup.SyncDir(restored); err != nil {
			return err
		}
		plan.Crashpoint("restore-snapshot:moved")
		os.Remove(restored)
	}
	if err := a.runtimeFor(survivor).Start(ctx, a.spec(survivor)); err != nil {
		return err
	}
	return a.waitWrites(ctx, survivor)
}

// liveClusterID is the cluster ID m's status names ("" when it does not answer).
func (a *Applier) liveClusterID(ctx context.Context, m PlanMember) etcdmedic.ClusterID {
	cli, err := a.client(m.ClientURLs)
	if err != nil {
		return etcdmedic.NoID
	}
	defer cli.Close()
	for range 20 {
		sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		st, err := cli.Status(sctx, m.ClientURLs[0])
		cancel()
		if err == nil {
			return etcdmedic.ClusterID(st.Header.ClusterId)
		}
		time.Sleep(500 * time.Millisecond)
	}
	return etcdmedic.NoID
}

// restoreBeside checks the snapshot against the plan and restores it into dir (recreated).
func (a *Applier) restoreBeside(ctx context.Context, survivor PlanMember, dir string) error {
	src := a.Plan.FromSnapshot
	sum, err := backup.FileSHA256(src.Path)
	if err != nil {
		return err
	}
	if sum != src.SHA256 {
		return fmt.Errorf("%w: the snapshot %s changed since the plan was made (sha256 %s, planned %s)", ErrStale, src.Path, sum, src.SHA256)
	}
	if err := os.RemoveAll(dir); err != nil { // an interrupted restore of ours
		return err
	}
	args := []string{"snapshot", "restore", src.Path, "--data-dir", dir, "--name", survivor.Name,
		"--initial-cluster", initialClusterOf(survivor), "--initial-advertise-peer-urls", strings.Join(survivor.PeerURLs, ","),
		"--initial-cluster-token", a.restoreToken()}
	if src.BumpRevision > 0 {
		args = append(args, "--bump-revision", strconv.FormatUint(src.BumpRevision, 10))
	}
	if src.MarkCompacted {
		args = append(args, "--mark-compacted")
	}
	if survivor.WALDir != "" {
		// Restored beside the WAL dir, on its disk, to be renamed into it.
		if err := os.RemoveAll(restoredWAL(survivor)); err != nil {
			return err
		}
		args = append(args, "--wal-dir", restoredWAL(survivor))
	}
	a.say("%s %s", src.Etcdutl, strings.Join(args, " "))
	restore := exec.CommandContext(ctx, src.Etcdutl, args...)
	restore.Env = runtime.Environ(nil) // no ETCDCTL_PASSWORD, no stray ETCD_*
	out, err := restore.CombinedOutput()
	if err != nil {
		return fmt.Errorf("etcdutl snapshot restore: %v\n%s", err, lastLines(string(out), 10))
	}
	// Durable before the old data is moved aside for it.
	if err := backup.SyncTree(dir); err != nil {
		return fmt.Errorf("sync the restored data in %s: %w", dir, err)
	}
	if survivor.WALDir != "" {
		if err := backup.SyncTree(restoredWAL(survivor)); err != nil {
			return fmt.Errorf("sync the restored WAL in %s: %w", restoredWAL(survivor), err)
		}
	}
	return backup.SyncDir(filepath.Dir(dir))
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// restoredWAL is where a survivor whose WAL lives apart gets its restored WAL first.
func restoredWAL(m PlanMember) string { return strings.TrimRight(m.WALDir, "/") + ".etcdmedic-restore" }

// moveRestoredWAL renames the restored WAL segments into the survivor's WAL dir (emptied by
// the quarantine of its old data), when its WAL lives apart.
func moveRestoredWAL(m PlanMember) error {
	if m.WALDir == "" {
		return nil
	}
	from := restoredWAL(m)
	ents, err := os.ReadDir(from)
	if err != nil {
		return fmt.Errorf("the restored WAL in %s: %w", from, err)
	}
	if err := backup.MkdirAllSynced(m.WALDir); err != nil {
		return err
	}
	for _, e := range ents {
		if err := os.Rename(filepath.Join(from, e.Name()), filepath.Join(m.WALDir, e.Name())); err != nil {
			return fmt.Errorf("move the restored WAL into %s: %w", m.WALDir, err)
		}
	}
	if err := backup.SyncDir(m.WALDir); err != nil {
		return err
	}
	return os.Remove(from)
}
