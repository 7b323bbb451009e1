package guard

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/etcdmedic/etcdmedic/backup"
	"github.com/etcdmedic/etcdmedic/datadir"
)

// ApartWAL is the half of a quarantine that holds a member's WAL kept apart from its data dir
// (etcd's --wal-dir). It moves beside its own folder, on its own filesystem (a rename cannot
// cross to the data dir's), and is listed in the data dir quarantine's one manifest.
type ApartWAL struct {
	Source     string `json:"source"`     // the WAL dir as etcd was given it, absolute
	RealSource string `json:"realSource"` // with its links resolved: where the files were
	// Dir is the quarantine folder holding the files (in wal/), beside the WAL dir.
	Dir     string           `json:"dir"`
	Entries []string         `json:"entries"`
	Files   []backup.FileSum `json:"files"`
	Bytes   int64            `json:"bytes"`
}

// apartWAL is the WAL dir report read, when it is outside dataDir (resolved): nil when the WAL
// is in member/wal (it moves with the data dir).
func apartWAL(report *datadir.Report, dataDir string) (*ApartWAL, error) {
	if report == nil || report.WALDir == "" || report.WALDir == filepath.Join(report.MemberDir, "wal") {
		return nil, nil // member/wal, even a link to another disk: it moves with the data dir
	}
	given, err := filepath.Abs(report.WALDir)
	if err != nil {
		return nil, err
	}
	real, err := filepath.EvalSymlinks(given)
	if err != nil {
		return nil, fmt.Errorf("resolve the WAL dir %s: %w", given, err)
	}
	if rel, err := filepath.Rel(dataDir, real); err == nil && !escapes(rel) {
		return nil, nil
	}
	return &ApartWAL{Source: given, RealSource: real, Entries: topLevel(real)}, nil
}

// walLocked refuses a WAL dir a running etcd holds (its OFD lock, or flock, on the newest
// segment: datadir's check, as for a data dir).
func walLocked(dir string) error {
	if datadir.WALDirLocked(dir) {
		return fmt.Errorf("a process runs on the WAL dir %s (its newest segment is locked): stop it first", dir)
	}
	return nil
}

// sum checksums the WAL dir where it is.
func (w *ApartWAL) sum() error {
	var err error
	if w.Files, w.Bytes, err = backup.Checksum(w.RealSource, nil); err != nil {
		return fmt.Errorf("checksum the WAL dir %s: %w", w.RealSource, err)
	}
	return nil
}

// prepare makes the WAL half's unfinished quarantine folder (named as the data dir's, in the
// WAL dir's own quarantine folder) unless it is there, or already finished.
func (w *ApartWAL) prepare(name string) error {
	if w.Dir == "" {
		base, err := walQuarantineBase(w.RealSource)
		if err != nil {
			return err
		}
		w.Dir = filepath.Join(base, strings.TrimSuffix(name, partialSuffix))
	}
	if _, err := os.Stat(w.Dir); err == nil {
		return nil // finished by an interrupted run
	}
	return backup.MkdirAllSynced(filepath.Join(w.Dir+partialSuffix, "wal"))
}

// move renames the WAL dir's entries into the WAL half's folder, and checks them there.
func (w *ApartWAL) move(manifestAt string) error {
	if _, err := os.Stat(w.Dir); err == nil {
		return nil // finished by an interrupted run
	}
	partial := w.Dir + partialSuffix
	if err := backup.WriteJSONAtomic(filepath.Join(partial, "manifest-is-in.json"), map[string]string{"manifest": manifestAt}); err != nil {
		return err
	}
	data := filepath.Join(partial, "wal")
	for _, name := range w.Entries {
		src := filepath.Join(w.RealSource, name)
		if _, err := os.Lstat(src); errors.Is(err, fs.ErrNotExist) {
			continue // moved by the interrupted run
		}
		if err := renameNoReplace(src, filepath.Join(data, name)); err != nil {
			return fmt.Errorf("move %s of the WAL dir into quarantine: %w", name, err)
		}
	}
	if err := backup.SyncDir(data); err != nil {
		return err
	}
	if err := backup.SyncDir(w.RealSource); err != nil {
		return err
	}
	if err := backup.Verify(data, w.Files); err != nil {
		return fmt.Errorf("the WAL quarantine %s does not match its manifest (nothing was deleted; the files are in %s): %w", partial, data, err)
	}
	if err := os.Rename(partial, w.Dir); err != nil {
		return err
	}
	return backup.SyncDir(filepath.Dir(w.Dir))
}
