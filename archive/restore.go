package archive

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/etcdmedic/etcdmedic/backup"
	"github.com/etcdmedic/etcdmedic/datadir"
	"github.com/etcdmedic/etcdmedic/store"
)

// Target is one member a restore produces a data dir for.
type Target struct {
	Name    string
	DataDir string
	// PeerURL is its advertised peer URL; "" takes the one the backup's membership records
	// for Name.
	PeerURL string
}

// RestoreOptions say how.
type RestoreOptions struct {
	// Etcdutl restores (of the version the members will run): binary and leading args.
	Etcdutl []string
	// BumpRevision and MarkCompacted are etcdutl's: for Kubernetes, revisions must never go
	// back under apiservers and informers (see the README's restore section).
	BumpRevision  uint64
	MarkCompacted bool
	// Token is the new cluster's --initial-cluster-token ("" : etcdutl's default).
	Token   string
	Scratch string
	// Etcd is the server command a scratch member runs to replay history after the full
	// backup (binary and leading args).
	Etcd []string
	// Credentials log in to the scratch member when the backup was taken with auth enabled.
	Credentials Credentials
}

// Restored is what Restore made.
type Restored struct {
	Backup string `json:"backup"`
	// Revision is the point restored (before any bump), At when its last change was captured.
	Revision       int64     `json:"revision"`
	At             time.Time `json:"at"`
	Replayed       int64     `json:"replayedRevisions"` // revisions of history replayed after the full backup
	BumpedTo       int64     `json:"bumpedTo,omitempty"`
	InitialCluster string    `json:"initialCluster"`
	DataDirs       []string  `json:"dataDirs"`
}

// Restore downloads the point's full backup (checked against its manifest and etcd's trailer),
// replays the history after it up to the point, and restores the result with etcdutl into a
// data dir for every target, as one new cluster: every data dir must be absent or empty (a
// restore never writes over data: move it aside first). Start each member on its data dir
// afterwards; the flags about the initial cluster are then ignored.
func Restore(ctx context.Context, st *store.Store, p *Point, targets []Target, opts RestoreOptions) (*Restored, error) {
	if len(targets) == 0 {
		return nil, errors.New("give the members to restore: --data-dir NAME=PATH (one per member)")
	}
	if opts.MarkCompacted && opts.BumpRevision == 0 {
		return nil, errors.New("--mark-compacted needs --bump-revision (etcdutl snapshot restore refuses it alone)")
	}
	for _, t := range targets {
		if err := emptyOrAbsent(t.DataDir); err != nil {
			return nil, err
		}
	}
	if err := os.MkdirAll(opts.Scratch, 0o700); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(opts.Scratch, "restore-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	base, snap := filepath.Join(dir, "full.db"), filepath.Join(dir, "snapshot.db")
	if err := Fetch(ctx, st, &p.Full, base); err != nil {
		return nil, err
	}
	if err := fillPeerURLs(base, targets); err != nil { // the cluster's membership, as backed up
		return nil, err
	}
	if err := materialize(ctx, st, p, opts.Etcd, opts.Etcdutl, opts.Credentials, base, snap); err != nil {
		return nil, err
	}
	var initial []string
	for _, t := range targets {
		initial = append(initial, t.Name+"="+t.PeerURL)
	}
	res := &Restored{Backup: p.Full.ID, Revision: p.Revision, At: p.At, Replayed: p.Revision - p.Full.Revision, InitialCluster: strings.Join(initial, ",")}
	if opts.BumpRevision > 0 {
		res.BumpedTo = p.Revision + int64(opts.BumpRevision)
	}
	// Every member is restored into a folder of its own inside its data dir first, and moved
	// into place only once all are: a restore that fails on one member leaves every data dir
	// as it found it, and running it again starts over.
	var staged []string
	unstage := func() {
		for _, dir := range staged {
			os.RemoveAll(dir)
		}
	}
	for _, t := range targets {
		stage := filepath.Join(t.DataDir, restoringDir)
		staged = append(staged, stage)
		args := []string{"snapshot", "restore", snap, "--name", t.Name, "--data-dir", stage,
			"--initial-cluster", res.InitialCluster, "--initial-advertise-peer-urls", t.PeerURL}
		if opts.Token != "" {
			args = append(args, "--initial-cluster-token", opts.Token)
		}
		if opts.BumpRevision > 0 {
			args = append(args, "--bump-revision", fmt.Sprint(opts.BumpRevision))
		}
		if opts.MarkCompacted {
			args = append(args, "--mark-compacted")
		}
		var out bytes.Buffer
		cmd := etcdutlCommand(ctx, opts.Etcdutl, args...)
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			unstage()
			return res, fmt.Errorf("etcdutl %s: %v: %s (no data dir was changed)", strings.Join(args, " "), err, lastLine(out.String()))
		}
	}
	for i, t := range targets {
		if err := moveIntoPlace(staged[i], t.DataDir); err != nil {
			return res, err
		}
		res.DataDirs = append(res.DataDirs, t.DataDir)
	}
	return res, nil
}

// restoringDir is where, inside a data dir, a member is restored before it is moved into place.
const restoringDir = ".etcdmedic-restoring"

// moveIntoPlace moves what etcdutl restored into stage (the member folder) up into dataDir,
// synced, and removes the stage.
func moveIntoPlace(stage, dataDir string) error {
	ents, err := os.ReadDir(stage)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if err := os.Rename(filepath.Join(stage, e.Name()), filepath.Join(dataDir, e.Name())); err != nil {
			return fmt.Errorf("move the restored %s into %s: %w", e.Name(), dataDir, err)
		}
	}
	if err := backup.SyncDir(dataDir); err != nil {
		return err
	}
	return os.Remove(stage)
}

// fillPeerURLs takes each target's peer URL, when not given, from the membership the snapshot
// records.
func fillPeerURLs(snap string, targets []Target) error {
	var known map[string]string
	for i := range targets {
		if targets[i].PeerURL != "" {
			continue
		}
		if known == nil {
			rep, err := datadir.Inspect(snap, datadir.Options{})
			if err != nil || rep.Backend == nil {
				return fmt.Errorf("read the backup's membership: %v", err)
			}
			known = map[string]string{}
			for _, m := range rep.Backend.Members {
				if len(m.PeerURLs) > 0 {
					known[m.Name] = m.PeerURLs[0]
				}
			}
		}
		u, ok := known[targets[i].Name]
		if !ok {
			return fmt.Errorf("the backup's membership has no member %q: give its peer URL with --peer-url %s=URL", targets[i].Name, targets[i].Name)
		}
		targets[i].PeerURL = u
	}
	return nil
}

func emptyOrAbsent(dir string) error {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if len(ents) == 1 && ents[0].Name() == restoringDir {
		// A restore cut short before its members were moved into place: its own, remade now.
		return os.RemoveAll(filepath.Join(dir, restoringDir))
	}
	if len(ents) > 0 {
		return fmt.Errorf("%s is not empty: a restore never writes over data; move it aside first (etcdmedic guard --fix quarantines a stale data dir)", dir)
	}
	return nil
}
