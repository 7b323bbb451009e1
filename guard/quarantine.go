package guard

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/etcdmedic/etcdmedic/datadir"
)

// Manifest records what a quarantine holds, with checksums, so that anyone can prove later
// that nothing was lost.
type Manifest struct {
	Source    string    `json:"source"`
	CreatedAt time.Time `json:"createdAt"`
	Class     Class     `json:"class"`
	Reason    string    `json:"reason"`
	Files     []FileSum `json:"files"`
	Bytes     int64     `json:"bytes"`
}

// FileSum is one quarantined file.
type FileSum struct {
	Path   string      `json:"path"` // relative to the data dir
	Size   int64       `json:"size"`
	Mode   fs.FileMode `json:"mode"`
	SHA256 string      `json:"sha256"`
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
	if err := readJSON(manifestPath, &m); errors.Is(err, fs.ErrNotExist) {
		// Nothing has moved yet: checksum everything where it is.
		m = Manifest{Source: dataDir, CreatedAt: now.UTC(), Class: v.Class, Reason: v.Reason}
		if m.Files, m.Bytes, err = checksumTree(dataDir, true); err != nil {
			return nil, err
		}
		if err := writeJSONAtomic(manifestPath, m); err != nil {
			return nil, err
		}
		if err := writeJSONAtomic(filepath.Join(partial, "report.json"), report); err != nil {
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
	if err := syncDir(data); err != nil {
		return nil, err
	}
	if err := syncDir(dataDir); err != nil {
		return nil, err
	}
	if err := verifyAgainst(data, m); err != nil {
		return nil, fmt.Errorf("quarantine %s does not match its manifest (nothing was deleted; the data is in %s): %w", partial, data, err)
	}
	final := strings.TrimSuffix(partial, partialSuffix)
	if err := os.Rename(partial, final); err != nil {
		return nil, err
	}
	if err := syncDir(base); err != nil {
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
	if err := readJSON(filepath.Join(dir, "manifest.json"), &m); err != nil {
		return err
	}
	return verifyAgainst(filepath.Join(dir, "data"), m)
}

func verifyAgainst(data string, m Manifest) error {
	got, _, err := checksumTree(data, false)
	if err != nil {
		return err
	}
	have := map[string]FileSum{}
	for _, f := range got {
		have[f.Path] = f
	}
	for _, want := range m.Files {
		g, ok := have[want.Path]
		if !ok {
			return fmt.Errorf("%s is missing", want.Path)
		}
		if g.Size != want.Size || g.SHA256 != want.SHA256 {
			return fmt.Errorf("%s differs: %d bytes sha256 %s, manifest says %d bytes sha256 %s", want.Path, g.Size, g.SHA256, want.Size, want.SHA256)
		}
	}
	return nil
}

// checksumTree lists every regular file under root with its size and sha256.
func checksumTree(root string, skipIgnorable bool) ([]FileSum, int64, error) {
	var out []FileSum
	var total int64
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if skipIgnorable && d.IsDir() && datadir.Ignorable[rel] {
			return filepath.SkipDir
		}
		if !d.Type().IsRegular() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		sum, err := fileSHA256(p)
		if err != nil {
			return err
		}
		out = append(out, FileSum{Path: rel, Size: info.Size(), Mode: info.Mode(), SHA256: sum})
		total += info.Size()
		return nil
	})
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, total, err
}

func fileSHA256(p string) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("checksum %s: %w", p, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// writeJSONAtomic writes through a temporary file, fsync and rename: a crash leaves the old
// file or the new one, never half of one.
func writeJSONAtomic(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	return syncDir(filepath.Dir(path))
}

func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}
