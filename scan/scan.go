// Package scan finds etcd and PD data dirs under a set of roots (a node's local-volume
// directories, say) and says whose they are.
package scan

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/etcdmedic/etcdmedic/cluster"
	"github.com/etcdmedic/etcdmedic/datadir"
	"github.com/etcdmedic/etcdmedic/guard"
)

// Found is one data dir found.
type Found struct {
	Path      string         `json:"path"`
	Kind      string         `json:"kind"`
	ClusterID string         `json:"clusterID,omitempty"`
	MemberID  string         `json:"memberID,omitempty"`
	Name      string         `json:"name,omitempty"`
	LastIndex uint64         `json:"lastIndex,omitempty"`
	Modified  time.Time      `json:"modified"`
	InUse     bool           `json:"inUse"` // a running process holds its files
	Error     string         `json:"error,omitempty"`
	Verdict   *guard.Verdict `json:"verdict,omitempty"` // with a live cluster to compare to
}

// Result is a whole scan.
type Result struct {
	Roots       []string `json:"roots"`
	Dirs        int      `json:"dirsVisited"`
	Found       []Found  `json:"found"`
	Quarantines []string `json:"quarantines"`
	Skipped     []string `json:"skipped"` // unreadable entries, loops, with why
}

// Options bound a scan.
type Options struct {
	MaxDepth int // directories below a root; 0 means 8
	Workers  int // data dirs inspected at once; 0 means 4
}

// Scan walks roots (following symlinks to directories, each directory once), inspects every
// data dir it finds without descending into it, and compares each with the live view v
// when there is one.
func Scan(ctx context.Context, roots []string, v *cluster.View, opts Options) (*Result, error) {
	if opts.MaxDepth == 0 {
		opts.MaxDepth = 8
	}
	if opts.Workers == 0 {
		opts.Workers = 4
	}
	res := &Result{Roots: roots, Found: []Found{}, Quarantines: []string{}, Skipped: []string{}}
	w := &walker{res: res, seen: map[[2]uint64]bool{}, maxDepth: opts.MaxDepth}
	for _, root := range roots {
		st, err := os.Stat(root)
		if err != nil {
			return nil, fmt.Errorf("scan root %s: %w", root, err)
		}
		if !st.IsDir() {
			return nil, fmt.Errorf("scan root %s is not a directory", root)
		}
		if err := w.walk(ctx, root, 0); err != nil {
			return nil, err
		}
	}
	inspectAll(ctx, res, w.candidates, v, opts.Workers)
	return res, nil
}

type walker struct {
	res        *Result
	seen       map[[2]uint64]bool
	maxDepth   int
	candidates []string
}

func (w *walker) walk(ctx context.Context, dir string, depth int) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	st, err := os.Stat(dir)
	if err != nil {
		w.skip(dir, err)
		return nil
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		key := [2]uint64{uint64(sys.Dev), sys.Ino}
		if w.seen[key] {
			return nil // reached again through a symlink: a loop, or two names for one dir
		}
		w.seen[key] = true
	}
	w.res.Dirs++
	ents, err := os.ReadDir(dir)
	if err != nil {
		w.skip(dir, err)
		return nil
	}
	names := map[string]bool{}
	for _, e := range ents {
		names[e.Name()] = true
	}
	if isDataDir(dir, names) {
		w.candidates = append(w.candidates, dir)
		return nil
	}
	if depth >= w.maxDepth {
		return nil
	}
	for _, e := range ents {
		p := filepath.Join(dir, e.Name())
		if e.Name() == datadir.QuarantineFolder || strings.HasSuffix(e.Name(), datadir.QuarantineFolder) {
			w.res.Quarantines = append(w.res.Quarantines, p)
			continue
		}
		isDir := e.IsDir()
		if e.Type()&fs.ModeSymlink != 0 {
			t, err := os.Stat(p)
			if err != nil {
				w.skip(p, err)
				continue
			}
			isDir = t.IsDir()
		}
		if isDir {
			if err := w.walk(ctx, p, depth+1); err != nil {
				return err
			}
		}
	}
	return nil
}

func (w *walker) skip(p string, err error) {
	w.res.Skipped = append(w.res.Skipped, fmt.Sprintf("%s: %v", p, err))
}

// isDataDir: etcd's --data-dir holds member/, PD's also a join file.
func isDataDir(dir string, names map[string]bool) bool {
	if names["join"] {
		// PD's join file: a small regular file (a "join/" folder is someone else's).
		if st, err := os.Lstat(filepath.Join(dir, "join")); err == nil && st.Mode().IsRegular() && st.Size() < 1<<20 {
			return true
		}
	}
	if !names["member"] {
		return false
	}
	wal, err := os.ReadDir(filepath.Join(dir, "member", "wal"))
	if err != nil {
		return false
	}
	for _, e := range wal {
		if strings.HasSuffix(e.Name(), ".wal") {
			return true
		}
	}
	return false
}

func inspectAll(ctx context.Context, res *Result, dirs []string, v *cluster.View, workers int) {
	found := make([]Found, len(dirs))
	jobs := make(chan int)
	var wg sync.WaitGroup
	for i := 0; i < workers; i++ {
		wg.Go(func() {
			for i := range jobs {
				found[i] = inspectOne(dirs[i], v)
			}
		})
	}
	for i := range dirs {
		if ctx.Err() != nil {
			break
		}
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	sort.Slice(found, func(i, j int) bool { return found[i].Path < found[j].Path })
	res.Found = append(res.Found, found...)
	sort.Strings(res.Quarantines)
}

func inspectOne(dir string, v *cluster.View) Found {
	f := Found{Path: dir}
	if st, err := os.Stat(dir); err == nil {
		f.Modified = newestModTime(dir, st.ModTime())
	}
	r, err := datadir.Inspect(dir, datadir.Options{})
	if err != nil {
		f.Kind = "unreadable"
		f.Error = err.Error()
		if errors.Is(err, datadir.ErrLocked) {
			f.Kind, f.InUse = datadir.KindEtcdMember, true
		}
		return f
	}
	f.Kind = r.Kind
	if r.Identity != nil {
		f.ClusterID, f.MemberID, f.Name = r.Identity.ClusterID.String(), r.Identity.MemberID.String(), r.Identity.Name
	}
	if r.Raft != nil {
		f.LastIndex = r.Raft.LastIndex
	}
	if v != nil {
		verdict := guard.Classify(r, v, guard.Expect{})
		f.Verdict = &verdict
	}
	return f
}

// newestModTime is the data dir's last write: the newest of its WAL segments and db.
func newestModTime(dir string, t time.Time) time.Time {
	for _, p := range []string{filepath.Join(dir, "member", "snap", "db"), filepath.Join(dir, "join")} {
		if st, err := os.Stat(p); err == nil && st.ModTime().After(t) {
			t = st.ModTime()
		}
	}
	if ents, err := os.ReadDir(filepath.Join(dir, "member", "wal")); err == nil {
		for _, e := range ents {
			if info, err := e.Info(); err == nil && info.ModTime().After(t) {
				t = info.ModTime()
			}
		}
	}
	return t.UTC()
}

// Stale reports whether any found data dir must not rejoin as it is.
func (r *Result) Stale() bool {
	for _, f := range r.Found {
		if f.Verdict != nil && !f.Verdict.Safe && f.Verdict.Movable {
			return true
		}
	}
	return false
}
