package crashfs

import (
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// ErrUnavailable marks a Mount that FUSE cannot serve here: no /dev/fuse, not root, or the
// mount itself failed. Tests skip on it; commands print it as the reason.
var ErrUnavailable = errors.New("crash filesystem unavailable")

// stashName is the directory, at the root of the backing dir and hidden from the mount, where
// removed entries wait until their removal is durable.
const stashName = ".crashfs-stash"

// cacheTimeout is how long the kernel may cache entries and attributes; every change goes
// through the mount, so the cache is never stale.
const cacheTimeout = time.Second

// FS is one mounted crash filesystem over a backing dir.
type FS struct {
	backing    string
	mountpoint string
	server     *fuse.Server

	// life serialises Unmount and Cut; closed is set once either finished.
	life   sync.Mutex
	closed bool

	// powerOff is set when Cut starts: from then on every operation fails with EIO.
	powerOff atomic.Bool
	// inFlight is held shared by every operation, exclusively by Cut while it reverts.
	inFlight sync.RWMutex

	// mu guards the logs below and serialises every change to the backing dir, so the logs
	// record changes in the order they happened.
	mu    sync.Mutex
	seq   uint64                // orders writes and directory changes
	files map[uint64]*fileState // by inode number: files with unsynced data
	names nameLog

	panicMu sync.Mutex
	panics  []string

	// afterPowerOff, when set by a test, runs inside Cut once no operation is in flight.
	afterPowerOff func()
}

// Pending is what a cut would drop now.
type Pending struct {
	// Files is how many files have unsynced data.
	Files int `json:"files"`
	// Bytes counts the bytes written to them, and truncated or grown, since their last sync.
	Bytes int64 `json:"bytes"`
	// Entries is how many directory changes no directory fsync has made durable yet.
	Entries int `json:"entries"`
}

// Mount mounts a crash filesystem over backing at mountpoint (created if missing). Without
// FUSE (no /dev/fuse, not root, mount refused) the error wraps ErrUnavailable.
func Mount(backing, mountpoint string) (*FS, error) {
	if err := checkFUSE(); err != nil {
		return nil, err
	}
	backing, mountpoint, err := checkDirs(backing, mountpoint)
	if err != nil {
		return nil, err
	}
	// A stash left behind holds only removals that were durable (or a crashed test's): drop it.
	stash := filepath.Join(backing, stashName)
	if err := os.RemoveAll(stash); err != nil {
		return nil, fmt.Errorf("clear %s: %w", stash, err)
	}
	if err := os.Mkdir(stash, 0o700); err != nil {
		return nil, fmt.Errorf("create %s: %w", stash, err)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(backing, &st); err != nil {
		return nil, fmt.Errorf("stat %s: %w", backing, err)
	}
	f := &FS{backing: backing, mountpoint: mountpoint, files: map[uint64]*fileState{}}
	f.names.lastChange = map[uint64]uint64{}
	timeout := cacheTimeout
	server, err := fs.Mount(mountpoint, f.newRoot(&st), &fs.Options{
		MountOptions: fuse.MountOptions{
			DirectMount: true,
			FsName:      backing,
			Name:        "crashfs",
			Logger:      log.New(io.Discard, "", 0), // a cut makes go-fuse complain about the dead connection
		},
		EntryTimeout:   &timeout,
		AttrTimeout:    &timeout,
		RootStableAttr: &fs.StableAttr{Ino: st.Ino, Mode: syscall.S_IFDIR},
		Logger:         log.New(io.Discard, "", 0),
	})
	if err != nil {
		return nil, fmt.Errorf("%w: mount FUSE on %s: %v", ErrUnavailable, mountpoint, err)
	}
	f.server = server
	return f, nil
}

// checkFUSE says why this process cannot mount FUSE itself, if it cannot.
func checkFUSE() error {
	if _, err := os.Stat("/dev/fuse"); err != nil {
		return fmt.Errorf("%w: no /dev/fuse: %v", ErrUnavailable, err)
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("%w: mounting FUSE directly needs root (euid %d)", ErrUnavailable, os.Geteuid())
	}
	return nil
}

// checkDirs makes both paths absolute, creates the mountpoint, and refuses a mount inside its
// own backing dir or the reverse: either would make the filesystem call itself.
func checkDirs(backing, mountpoint string) (string, string, error) {
	backing, err := filepath.Abs(backing)
	if err != nil {
		return "", "", err
	}
	mountpoint, err = filepath.Abs(mountpoint)
	if err != nil {
		return "", "", err
	}
	if fi, err := os.Stat(backing); err != nil {
		return "", "", fmt.Errorf("backing dir: %w", err)
	} else if !fi.IsDir() {
		return "", "", fmt.Errorf("backing dir %s is not a directory", backing)
	}
	if within(mountpoint, backing) || within(backing, mountpoint) {
		return "", "", fmt.Errorf("mountpoint %s and backing dir %s must not contain each other", mountpoint, backing)
	}
	if err := os.MkdirAll(mountpoint, 0o755); err != nil {
		return "", "", fmt.Errorf("create mountpoint: %w", err)
	}
	return backing, mountpoint, nil
}

// within reports whether path is dir or below it.
func within(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

// Unmount unmounts cleanly, like a clean shutdown: everything written counts as synced and
// stays. It fails while a process still uses the mount. After Cut or Unmount it does nothing.
func (f *FS) Unmount() error {
	f.life.Lock()
	defer f.life.Unlock()
	if f.closed {
		return nil
	}
	if err := f.server.Unmount(); err != nil {
		return fmt.Errorf("unmount %s: %w", f.mountpoint, err)
	}
	f.closed = true
	f.mu.Lock()
	defer f.mu.Unlock()
	f.forgetUnsynced()
	return errors.Join(os.RemoveAll(filepath.Join(f.backing, stashName)), f.panicErr())
}

// Unsynced reports what a cut would drop now.
func (f *FS) Unsynced() Pending {
	f.mu.Lock()
	defer f.mu.Unlock()
	p := Pending{Files: len(f.files), Entries: len(f.names.changes)}
	for _, s := range f.files {
		p.Bytes += s.unsyncedBytes
	}
	return p
}

// forgetUnsynced treats everything as synced: it drops every undo record. Callers hold mu.
func (f *FS) forgetUnsynced() {
	for ino, s := range f.files {
		s.close()
		delete(f.files, ino)
	}
	f.names = nameLog{lastChange: map[uint64]uint64{}}
}

// nextSeq returns the next number in the order of changes. Callers hold mu.
func (f *FS) nextSeq() uint64 {
	f.seq++
	return f.seq
}

// enter admits one operation, or refuses it once the power is off.
func (f *FS) enter() bool {
	if f.powerOff.Load() {
		return false
	}
	f.inFlight.RLock()
	if f.powerOff.Load() {
		f.inFlight.RUnlock()
		return false
	}
	return true
}

// do runs one FUSE operation: EIO once the power is off, and EIO (recorded, and returned by
// Cut and Unmount) instead of a crashed test process when it panics.
func (f *FS) do(op string, fn func() syscall.Errno) (errno syscall.Errno) {
	if !f.enter() {
		return syscall.EIO
	}
	defer f.inFlight.RUnlock()
	defer f.recoverPanic(op, &errno)
	return fn()
}

// change is do for an operation that changes the backing dir: it also holds mu.
func (f *FS) change(op string, fn func() syscall.Errno) syscall.Errno {
	return f.do(op, func() syscall.Errno {
		f.mu.Lock()
		defer f.mu.Unlock()
		return fn()
	})
}

func (f *FS) recoverPanic(op string, errno *syscall.Errno) {
	r := recover()
	if r == nil {
		return
	}
	msg := fmt.Sprintf("crashfs: panic in %s on %s: %v\n%s", op, f.mountpoint, r, debug.Stack())
	fmt.Fprintln(os.Stderr, msg)
	f.panicMu.Lock()
	f.panics = append(f.panics, msg)
	f.panicMu.Unlock()
	*errno = syscall.EIO
}

// panicErr returns the panics caught in FUSE handlers, if any.
func (f *FS) panicErr() error {
	f.panicMu.Lock()
	defer f.panicMu.Unlock()
	if len(f.panics) == 0 {
		return nil
	}
	return fmt.Errorf("%d FUSE operation(s) panicked; first: %s", len(f.panics), f.panics[0])
}
