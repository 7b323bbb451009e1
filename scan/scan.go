// Package scan finds etcd and PD data dirs under a set of roots (a node's local-volume
// directories, say) and says whose they are.
package scan

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/etcdmedic/etcdmedic/cluster"
	"github.com/etcdmedic/etcdmedic/datadir"
	"github.com/etcdmedic/etcdmedic/deployment"
	"github.com/etcdmedic/etcdmedic/guard"
	"github.com/etcdmedic/etcdmedic/runtime/local"
)

// kindUnreadable is a Found data dir that could not be inspected.
const kindUnreadable = "unreadable"

// Found is one data dir found.
type Found struct {
	Path      string    `json:"path"`
	Kind      string    `json:"kind"`
	ClusterID string    `json:"clusterID,omitempty"`
	MemberID  string    `json:"memberID,omitempty"`
	Name      string    `json:"name,omitempty"`
	LastIndex uint64    `json:"lastIndex,omitempty"`
	Modified  time.Time `json:"modified"`
	InUse     bool      `json:"inUse"` // a running process holds its files
	// UsedBy is the process (and its systemd unit or pod) configured with this data dir,
	// running now, and WALDir its --wal-dir when the WAL lives apart.
	UsedBy  *local.Process `json:"usedBy,omitempty"`
	WALDir  string         `json:"walDir,omitempty"`
	Error   string         `json:"error,omitempty"`
	Verdict *guard.Verdict `json:"verdict,omitempty"` // with a live cluster to compare to
}

// Result is a whole scan.
type Result struct {
	Roots       []string `json:"roots"`
	Dirs        int      `json:"dirsVisited"`
	Found       []Found  `json:"found"`
	Quarantines []string `json:"quarantines"`
	Skipped     []string `json:"skipped"` // unreadable entries and dangling links, with why
	// Outside are the symlinks leading out of the roots, not followed (LINK -> TARGET): what
	// is behind them was not scanned.
	Outside []string `json:"outside"`
	// NotEntered are the kernel's own filesystems (/proc, /sys, /dev, a procfs or sysfs
	// mounted elsewhere): they hold no data dirs, and walking /proc walks every process's
	// view of the whole host.
	NotEntered []string `json:"notEntered"`
}

// Options bound a scan.
type Options struct {
	MaxDepth int // directories below a root; 0 means 8
	Workers  int // data dirs inspected at once; 0 means 4
	// FollowLinksOutside follows symlinks that lead out of the roots (never into /proc, /sys
	// or /dev).
	FollowLinksOutside bool
}

// Scan walks roots (following symlinks to directories inside the roots, each directory once),
// inspects every data dir it finds without descending into it, and compares each with the live
// view v when there is one.
func Scan(ctx context.Context, roots []string, v *cluster.View, opts Options) (*Result, error) {
	if opts.MaxDepth == 0 {
		opts.MaxDepth = 8
	}
	if opts.Workers == 0 {
		opts.Workers = 4
	}
	res := &Result{Roots: roots, Found: []Found{}, Quarantines: []string{}, Skipped: []string{}, Outside: []string{}, NotEntered: []string{}}
	w := &walker{res: res, seen: map[[2]uint64]bool{}, maxDepth: opts.MaxDepth, followOutside: opts.FollowLinksOutside}
	// Every path is absolute from here: a running member's --data-dir and the files it holds
	// open are absolute, and a relative path would never match them (USED BY stayed empty).
	abss, reals := make([]string, len(roots)), make([]string, len(roots))
	for i, root := range roots {
		st, err := os.Stat(root)
		if err != nil {
			return nil, fmt.Errorf("scan root %s: %w", root, err)
		}
		if !st.IsDir() {
			return nil, fmt.Errorf("scan root %s is not a directory", root)
		}
		abss[i], err = filepath.Abs(root)
		if err == nil {
			reals[i], err = filepath.EvalSymlinks(abss[i])
		}
		if err != nil {
			return nil, fmt.Errorf("scan root %s: %w", root, err)
		}
		w.roots = append(w.roots, reals[i])
	}
	for i, root := range abss {
		if err := w.walk(ctx, root, reals[i], 0); err != nil {
			return nil, err
		}
	}
	inspectAll(ctx, res, w.candidates, v, opts.Workers)
	return res, nil
}

type walker struct {
	res           *Result
	seen          map[[2]uint64]bool
	maxDepth      int
	followOutside bool
	roots         []string // the roots' real paths
	candidates    []string
}

// walk visits dir, whose real path (symlinks resolved) is real.
func (w *walker) walk(ctx context.Context, dir, real string, depth int) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if kernelFS(real) {
		w.res.NotEntered = append(w.res.NotEntered, dir)
		return nil
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
		childReal := filepath.Join(real, e.Name())
		isDir := e.IsDir()
		if e.Type()&fs.ModeSymlink != 0 {
			t, err := os.Stat(p)
			if err == nil {
				childReal, err = filepath.EvalSymlinks(p)
			}
			if err != nil {
				w.skip(p, err)
				continue
			}
			if isDir = t.IsDir(); isDir && !w.followOutside && !w.inside(childReal) && !kernelFS(childReal) {
				w.res.Outside = append(w.res.Outside, p+" -> "+childReal)
				continue
			}
		}
		if isDir {
			if err := w.walk(ctx, p, childReal, depth+1); err != nil {
				return err
			}
		}
	}
	return nil
}

// inside reports whether real (a resolved path) is one of the roots or below one.
func (w *walker) inside(real string) bool {
	for _, r := range w.roots {
		if real == r || strings.HasPrefix(real, strings.TrimSuffix(r, "/")+"/") {
			return true
		}
	}
	return false
}

func (w *walker) skip(p string, err error) {
	w.res.Skipped = append(w.res.Skipped, fmt.Sprintf("%s: %v", p, err))
}

// kernelDirs are never entered, even with / as a root.
var kernelDirs = []string{"/proc", "/sys", "/dev"}

// kernelFSTypes are the kernel's pseudo filesystems, wherever they are mounted (a container's
// or chroot's own /proc).
var kernelFSTypes = map[int64]bool{
	unix.PROC_SUPER_MAGIC: true, unix.SYSFS_MAGIC: true, unix.CGROUP_SUPER_MAGIC: true, unix.CGROUP2_SUPER_MAGIC: true,
	unix.DEBUGFS_MAGIC: true, unix.TRACEFS_MAGIC: true, unix.SECURITYFS_MAGIC: true, unix.BPF_FS_MAGIC: true,
	unix.DEVPTS_SUPER_MAGIC: true, unix.PSTOREFS_MAGIC: true, unix.EFIVARFS_MAGIC: true, unix.BINFMTFS_MAGIC: true,
	unix.SELINUX_MAGIC: true,
}

// kernelFS reports whether real (a resolved path) is /proc, /sys, /dev or below, or on one of
// the kernel's pseudo filesystems.
func kernelFS(real string) bool {
	for _, d := range kernelDirs {
		if real == d || strings.HasPrefix(real, d+"/") {
			return true
		}
	}
	var st unix.Statfs_t
	return unix.Statfs(real, &st) == nil && kernelFSTypes[int64(st.Type)]
}

// isDataDir: etcd's --data-dir holds member/ with WAL segments; PD's may hold only its join
// file (a PD that will trust it and skip joining).
func isDataDir(dir string, names map[string]bool) bool {
	if names["join"] && isPDJoin(filepath.Join(dir, "join")) {
		return true
	}
	if !names["member"] {
		return false
	}
	if st, err := os.Stat(filepath.Join(dir, "member", "snap", "db")); err == nil && st.Mode().IsRegular() {
		return true // its WAL may live apart (--wal-dir): inspect says so
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

// maxPDJoin bounds a PD join file: one initial-cluster string.
const maxPDJoin = 64 << 10

// isPDJoin reports whether path is a PD join file: a small regular file holding an
// initial-cluster string, name=http(s)://host:port pairs. A folder's "join" is someone
// else's, and so is /usr/bin/join (coreutils), which a scan of / must not call a PD dir.
func isPDJoin(path string) bool {
	st, err := os.Lstat(path)
	if err != nil || !st.Mode().IsRegular() || st.Size() == 0 || st.Size() > maxPDJoin {
		return false
	}
	b, err := os.ReadFile(path)
	if err != nil || !utf8.Valid(b) {
		return false
	}
	pairs := strings.Split(strings.TrimSpace(string(b)), ",")
	for _, pair := range pairs {
		name, peer, ok := strings.Cut(strings.TrimSpace(pair), "=")
		if !ok || name == "" || strings.ContainsAny(name, " \t\x00") {
			return false
		}
		u, err := url.Parse(peer)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return false
		}
	}
	return true
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
	// The process configured with this data dir says where its WAL is, and who uses it.
	if pid, _, ok := local.FindProcess(dir); ok {
		p := local.Describe(pid)
		f.UsedBy = &p
		if spec, err := deployment.FromProcess(pid); err == nil && spec.WALDir != "" {
			f.WALDir = spec.WALDir
		}
	}
	r, err := datadir.Inspect(dir, datadir.Options{WALDir: f.WALDir})
	if err != nil {
		f.Kind = kindUnreadable
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

// Unjudged lists the data dirs a live cluster was given to judge but that could not be judged,
// as "PATH: CLASS: reason": UNKNOWN (the cluster not reached, or without quorum), UNREADABLE
// and INCOMPLETE are neither stale nor fine, so they must not pass for "no stale data dir".
func (r *Result) Unjudged() []string {
	var out []string
	for _, f := range r.Found {
		if v := f.Verdict; v != nil && (v.Class == guard.Unknown || v.Class == guard.Unreadable || v.Class == guard.Incomplete) {
			out = append(out, fmt.Sprintf("%s: %s: %s", f.Path, v.Class, v.Reason))
		}
	}
	return out
}

// UnjudgedWhy counts the data dirs that could not be judged by class, with the first one's
// reason cut to its first clause: "2 UNKNOWN (no member of the live cluster answered)".
func (r *Result) UnjudgedWhy() string {
	var parts []string
	for _, c := range []guard.Class{guard.Unknown, guard.Unreadable, guard.Incomplete} {
		n, why := 0, ""
		for _, f := range r.Found {
			if f.Verdict != nil && f.Verdict.Class == c {
				if n++; why == "" {
					why, _, _ = strings.Cut(f.Verdict.Reason, ": ")
				}
			}
		}
		if n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s (%s)", n, c, why))
		}
	}
	return strings.Join(parts, ", ")
}

// Partial lists what the scan could not look into, so that a data dir may be there unseen:
// skipped entries, links leading outside the roots, data dirs it could not read.
func (r *Result) Partial() []string {
	out := append(append([]string{}, r.Skipped...), r.Outside...)
	for _, f := range r.Found {
		if f.Kind == kindUnreadable {
			out = append(out, f.Path+": "+f.Error)
		}
	}
	return out
}
