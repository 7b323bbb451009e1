package guard

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/etcdmedic/etcdmedic/backup"
	"github.com/etcdmedic/etcdmedic/datadir"
)

// Manifest records what a quarantine holds, with checksums, so that anyone can prove later
// that nothing was lost.
type Manifest struct {
	Source    string           `json:"source"`
	CreatedAt time.Time        `json:"createdAt"`
	Class     Class            `json:"class"`
	Reason    string           `json:"reason"`
	Files     []backup.FileSum `json:"files"`
	Bytes     int64            `json:"bytes"`
}

// Quarantined says where a data dir's contents went.
type Quarantined struct {
	Dir   string `json:"dir"` // holds manifest.json, report.json and data/
	Files int    `json:"files"`
	Bytes int64  `json:"bytes"`
}

const partialSuffix = ".partial"

// Quarantine moves the contents of dataDir aside into a quarantine folder on the same
// filesystem: a manifest with every file's checksum and the inspect report first, then the
// entries, one rename each, then a check of every checksum. Nothing is deleted. Interrupted at
// any point, running it again finishes the same quarantine.
func Quarantine(dataDir string, report *datadir.Report, v Verdict, now time.Time) (*Quarantined, error) {
	dataDir = filepath.Clean(dataDir)
	base, err := quarantineBase(dataDir)
	if err != nil {
		return nil, err
	}
	partial, err := findPartial(base)
	if err != nil {
		return nil, err
	}
	if partial == "" {
		partial = filepath.Join(base, fmt.Sprintf("%s-%s%s", now.UTC().Format("20060102T150405Z"), strings.ToLower(string(v.Class)), partialSuffix))
		if err := os.MkdirAll(partial, 0o700); err != nil {
			return nil, fmt.Errorf("create quarantine folder: %w", err)
		}
	}
	manifestPath := filepath.Join(partial, "manifest.json")
	var m Manifest
	if err := backup.ReadJSON(manifestPath, &m); errors.Is(err, fs.ErrNotExist) {
		// Nothing has moved yet: checksum everything where it is.
		m = Manifest{Source: dataDir, CreatedAt: now.UTC(), Class: v.Class, Reason: v.Reason}
		if m.Files, m.Bytes, err = backup.Checksum(dataDir, datadir.Ignorable); err != nil {
			return nil, err
		}
		if err := backup.WriteJSONAtomic(manifestPath, m); err != nil {
			return nil, err
		}
		if err := backup.WriteJSONAtomic(filepath.Join(partial, "report.json"), report); err != nil {
			return nil, err
		}
	} else if err != nil {
		return nil, fmt.Errorf("read %s: %w", manifestPath, err)
	}
	data := filepath.Join(partial, "data")
	if err := os.MkdirAll(data, 0o700); err != nil {
		return nil, err
	}
	ents, err := os.ReadDir(dataDir)
	if err != nil {
		return nil, err
	}
	for _, e := range ents {
		if datadir.Ignorable[e.Name()] {
			continue
		}
		if err := os.Rename(filepath.Join(dataDir, e.Name()), filepath.Join(data, e.Name())); err != nil {
			return nil, fmt.Errorf("move %s into quarantine: %w", e.Name(), err)
		}
	}
	if err := backup.SyncDir(data); err != nil {
		return nil, err
	}
	if err := backup.SyncDir(dataDir); err != nil {
		return nil, err
	}
	if err := backup.Verify(data, m.Files); err != nil {
		return nil, fmt.Errorf("quarantine %s does not match its manifest (nothing was deleted; the data is in %s): %w", partial, data, err)
	}
	final := strings.TrimSuffix(partial, partialSuffix)
	if err := os.Rename(partial, final); err != nil {
		return nil, err
	}
	if err := backup.SyncDir(base); err != nil {
		return nil, err
	}
	return &Quarantined{Dir: final, Files: len(m.Files), Bytes: m.Bytes}, nil
}

// quarantineBase is where quarantines of dataDir go: beside it (<dataDir>.etcdmedic-quarantine)
// when its parent is on the same filesystem, else inside it (a volume's mount point).
func quarantineBase(dataDir string) (string, error) {
	st, err := os.Stat(dataDir)
	if err != nil {
		return "", err
	}
	parent, err := os.Stat(filepath.Dir(dataDir))
	if err == nil && sameDevice(st, parent) {
		return dataDir + datadir.QuarantineFolder, nil
	}
	return filepath.Join(dataDir, datadir.QuarantineFolder), nil
}

func sameDevice(a, b os.FileInfo) bool {
	sa, ok1 := a.Sys().(*syscall.Stat_t)
	sb, ok2 := b.Sys().(*syscall.Stat_t)
	return ok1 && ok2 && sa.Dev == sb.Dev
}

// findPartial returns an unfinished quarantine to resume, if there is one.
func findPartial(base string) (string, error) {
	ents, err := os.ReadDir(base)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	for _, e := range ents {
		if e.IsDir() && strings.HasSuffix(e.Name(), partialSuffix) {
			return filepath.Join(base, e.Name()), nil
		}
	}
	return "", nil
}

// Verify checks a finished quarantine folder against its manifest.
func Verify(dir string) error {
	var m Manifest
	if err := backup.ReadJSON(filepath.Join(dir, "manifest.json"), &m); err != nil {
		return err
	}
	return backup.Verify(filepath.Join(dir, "data"), m.Files)
}
