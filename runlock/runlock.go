// Package runlock lets one etcdmedic run at a time change a plan dir or a data dir: an
// exclusive flock on a lock file beside the target, which names the run that holds it, and on
// one named by the target's resolved path in a private folder under the temp dir, which every
// run takes, whether the target's parent can be written or not (lockFilesFor).
//
// The kernel drops a flock when its holder exits, however it exits, so a killed run never
// leaves a stale lock behind. The lock file itself is never removed: unlinking a flocked file
// lets a third run lock a new file of the same name while the second still holds the old one.
package runlock

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Suffix names the lock file beside its target: /var/lib/etcd.etcdmedic.lock.
const Suffix = ".etcdmedic.lock"

// fallbackFolder holds lock files, named by the sha256 of the target's resolved path, when the
// target's parent is not writable.
const fallbackFolder = "etcdmedic-locks"

// Lock is one held run lock. Release it when the run ends.
type Lock struct {
	Target   string // as given
	Resolved string // absolute, symlinks resolved: what the lock is keyed on
	// LockFile is the lock file beside the target, or the one in the fallback folder when the
	// target's parent is not writable (see lockFilesFor: the fallback one is held too).
	LockFile string
	files    []*os.File // in the order taken
}

// Release unlocks and closes, the files in the reverse order of their taking. The lock files
// stay (see the package comment).
func (l *Lock) Release() error {
	if l == nil {
		return nil
	}
	var first error
	for i := len(l.files) - 1; i >= 0; i-- {
		f := l.files[i]
		uerr := unix.Flock(int(f.Fd()), unix.LOCK_UN)
		if err := f.Close(); err != nil && first == nil {
			first = fmt.Errorf("release lock %s: %w", f.Name(), err)
		}
		if uerr != nil && first == nil {
			first = fmt.Errorf("release lock %s: %w", f.Name(), uerr)
		}
	}
	l.files = nil
	return first
}

// HeldError says that another run holds the target, and who, as far as can be told.
type HeldError struct {
	Target   string
	LockFile string
	PID      int    // 0 when unknown
	Command  string // the holder's command line; empty when unknown
	Purpose  string
	Since    time.Time // zero when unknown
	// Unverified is true when PID comes from the lock file alone: the kernel's list of flocks
	// names no holder in this pid namespace (a holder in a container shows as pid 0 there), so
	// PID may be another namespace's, or an earlier run's.
	Unverified bool
	at         time.Time // when the refusal happened: Since is shown as a clock time on the same day
}

func (e *HeldError) Error() string {
	return fmt.Sprintf("%s is in use by another etcdmedic run (%s): wait for it to finish, or stop it; nothing was changed", e.Target, e.holder())
}

func (e *HeldError) holder() string {
	if e.PID == 0 {
		return "holder unknown; see who has " + e.LockFile + " open: fuser -v " + e.LockFile
	}
	s := "pid " + strconv.Itoa(e.PID)
	if e.Unverified {
		s = "reported pid " + strconv.Itoa(e.PID) + " (not verified; possibly another pid namespace)"
	}
	if e.Command != "" {
		s += ": " + e.Command
	} else if e.Purpose != "" {
		s += ": " + e.Purpose
	}
	if !e.Since.IsZero() {
		layout := "2006-01-02 15:04:05"
		if e.Since.Local().Format(time.DateOnly) == e.at.Local().Format(time.DateOnly) {
			layout = time.TimeOnly
		}
		s += ", since " + e.Since.Local().Format(layout)
	}
	if e.Unverified {
		s += "; see who has " + e.LockFile + " open: fuser -v " + e.LockFile
	}
	return s
}

// holder is the lock file's content: one JSON line.
type holder struct {
	PID     int       `json:"pid"`
	Command string    `json:"command"`
	Purpose string    `json:"purpose"`
	Since   time.Time `json:"since"`
}

// locker carries what tests replace: the clock, the writability check, /proc/locks.
type locker struct {
	now       func() time.Time
	writable  func(dir string) bool
	procLocks string
	pid       int
	command   string
}

func defaultLocker() locker {
	return locker{
		now:       time.Now,
		writable:  func(dir string) bool { return unix.Access(dir, unix.W_OK) == nil },
		procLocks: "/proc/locks",
		pid:       os.Getpid(),
		command:   commandLine(os.Args),
	}
}

// Acquire takes the run lock for target (a plan dir or a data dir), without waiting: when
// another run holds it, the error is a *HeldError naming that run. purpose says what this run
// does ("guard --fix"); the next run that is refused is told.
func Acquire(target, purpose string) (*Lock, error) {
	return defaultLocker().acquire(target, purpose)
}

// AcquireAll locks every target, in the order of their resolved paths (duplicates once), or
// none: on failure it releases what it took and returns the first error.
func AcquireAll(targets []string, purpose string) (release func(), err error) {
	return defaultLocker().acquireAll(targets, purpose)
}

func (lk locker) acquire(target, purpose string) (*Lock, error) {
	resolved, err := resolve(target)
	if err != nil {
		return nil, err
	}
	return lk.acquireResolved(target, resolved, purpose)
}

func (lk locker) acquireAll(targets []string, purpose string) (func(), error) {
	type entry struct{ target, resolved string }
	var entries []entry
	for _, t := range targets {
		r, err := resolve(t)
		if err != nil {
			return nil, err
		}
		entries = append(entries, entry{t, r})
	}
	slices.SortStableFunc(entries, func(a, b entry) int { return strings.Compare(a.resolved, b.resolved) })
	entries = slices.CompactFunc(entries, func(a, b entry) bool { return a.resolved == b.resolved })
	var held []*Lock
	release := func() {
		for i := len(held) - 1; i >= 0; i-- {
			held[i].Release()
		}
	}
	for _, e := range entries {
		l, err := lk.acquireResolved(e.target, e.resolved, purpose)
		if err != nil {
			release()
			return nil, err
		}
		held = append(held, l)
	}
	return release, nil
}

func (lk locker) acquireResolved(target, resolved, purpose string) (*Lock, error) {
	files, err := lockFilesFor(resolved, lk.writable)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", target, err)
	}
	l := &Lock{Target: target, Resolved: resolved, LockFile: files[0]}
	line, _ := json.Marshal(holder{PID: lk.pid, Command: lk.command, Purpose: purpose, Since: lk.now()})
	for _, lockFile := range files {
		f, err := lk.lockOne(target, lockFile, append(line, '\n'))
		if err != nil {
			l.Release()
			return nil, err
		}
		l.files = append(l.files, f)
	}
	return l, nil
}

// lockOne opens lockFile, flocks it without waiting and writes the holder's line into it.
func (lk locker) lockOne(target, lockFile string, line []byte) (*os.File, error) {
	// O_NOFOLLOW: a symlink planted where the lock file goes must not make a root run
	// truncate the file it points to. Go opens with O_CLOEXEC, so a member this run starts
	// does not inherit the lock.
	f, err := os.OpenFile(lockFile, os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock file for %s: %w", target, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		defer f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, lk.held(target, lockFile, f)
		}
		return nil, fmt.Errorf("lock %s: %w", lockFile, err)
	}
	if err := writeHolder(f, line); err != nil {
		unix.Flock(int(f.Fd()), unix.LOCK_UN)
		f.Close()
		return nil, fmt.Errorf("write the holder into lock file %s: %w", lockFile, err)
	}
	return f, nil
}

func writeHolder(f *os.File, line []byte) error {
	if err := f.Truncate(0); err != nil {
		return err
	}
	if _, err := f.WriteAt(line, 0); err != nil {
		return err
	}
	return f.Sync()
}

// held describes the run holding lockFile: from the file's content, checked against the
// kernel's list of flocks, which also names the holder when the content is missing, torn, or
// left by an earlier run (the holder locks first and writes after).
func (lk locker) held(target, lockFile string, f *os.File) *HeldError {
	e := &HeldError{Target: target, LockFile: lockFile, at: lk.now()}
	var h holder
	b, _ := io.ReadAll(io.NewSectionReader(f, 0, 64<<10))
	line, _, _ := strings.Cut(string(b), "\n")
	if json.Unmarshal([]byte(line), &h) != nil || h.PID <= 0 {
		h = holder{}
	}
	pids := lk.flockHolders(f)
	switch {
	case h.PID > 0 && (len(pids) == 0 || slices.Contains(pids, h.PID)):
		e.PID, e.Command, e.Purpose, e.Since = h.PID, h.Command, h.Purpose, h.Since
		e.Unverified = len(pids) == 0
	case len(pids) > 0:
		e.PID = pids[0]
	}
	return e
}

// flockHolders lists the pids that /proc/locks shows holding a flock on f's inode. Lines
// read "1: FLOCK  ADVISORY  WRITE 1234 fd:01:5678 0 EOF" (device in hex, inode in decimal);
// waiters ("1: -> FLOCK ...") and pids of other pid namespaces (0) are skipped.
func (lk locker) flockHolders(f *os.File) []int {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return nil
	}
	pl, err := os.Open(lk.procLocks)
	if err != nil {
		return nil
	}
	defer pl.Close()
	var sameDev, sameIno []int
	sc := bufio.NewScanner(pl)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 || fields[1] != "FLOCK" {
			continue
		}
		pid, err := strconv.Atoi(fields[4])
		if err != nil || pid <= 0 {
			continue
		}
		parts := strings.Split(fields[5], ":")
		if len(parts) != 3 || parts[2] != strconv.FormatUint(st.Ino, 10) {
			continue
		}
		sameIno = append(sameIno, pid)
		maj, err1 := strconv.ParseUint(parts[0], 16, 32)
		mnr, err2 := strconv.ParseUint(parts[1], 16, 32)
		if err1 == nil && err2 == nil && uint32(maj) == unix.Major(st.Dev) && uint32(mnr) == unix.Minor(st.Dev) {
			sameDev = append(sameDev, pid)
		}
	}
	// Some filesystems (btrfs subvolumes, overlayfs) report another device in stat than in
	// /proc/locks: the inode alone is the next best match.
	if len(sameDev) > 0 {
		return sameDev
	}
	return sameIno
}

// resolve is the path a target is locked under: absolute, with symlinks resolved, so that a
// symlinked data dir and its real path share one lock. For a target that does not exist yet,
// its nearest existing ancestor is resolved.
func resolve(target string) (string, error) {
	abs, err := filepath.Abs(target)
	if err != nil {
		return "", fmt.Errorf("resolve %s: %w", target, err)
	}
	dir, rest := abs, ""
	for {
		real, err := filepath.EvalSymlinks(dir)
		if err == nil {
			return filepath.Join(real, rest), nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("resolve %s: %w", target, err)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return abs, nil
		}
		rest = filepath.Join(filepath.Base(dir), rest)
		dir = parent
	}
}

// lockFilesFor lists the lock files a run takes for a resolved target, in the order it takes
// them: the one beside the target when its parent is writable (a refusal names its holder
// from it, as before), then the one in the fallback folder. Every run takes the fallback file, so two runs exclude each other even when one
// found the parent missing or read-only and the other finds it writable (the first run, or
// the etcd it starts, creates the data dir). Only when the fallback folder cannot be used
// (another user's) and the parent is writable is the file beside the target taken alone, as
// it always was.
func lockFilesFor(resolved string, writable func(dir string) bool) ([]string, error) {
	beside, onlyFallback := lockFileFor(resolved, writable)
	fallback := beside
	if !onlyFallback {
		sum := sha256.Sum256([]byte(resolved))
		fallback = filepath.Join(os.TempDir(), fallbackFolder, hex.EncodeToString(sum[:])+".lock")
	}
	if err := privateFolder(filepath.Dir(fallback)); err != nil {
		if onlyFallback {
			return nil, err
		}
		return []string{beside}, nil
	}
	if onlyFallback {
		return []string{fallback}, nil
	}
	return []string{beside, fallback}, nil
}

// lockFileFor is where the lock of a resolved target lives: beside it, never inside (etcd's
// data dir must hold etcd's files only); when its parent is not writable (or missing), in a
// private folder under the temp dir, named by the sha256 of the resolved path.
func lockFileFor(resolved string, writable func(dir string) bool) (path string, fallback bool) {
	if writable(filepath.Dir(resolved)) {
		return resolved + Suffix, false
	}
	sum := sha256.Sum256([]byte(resolved))
	return filepath.Join(os.TempDir(), fallbackFolder, hex.EncodeToString(sum[:])+".lock"), true
}

// privateFolder creates dir (0700) and refuses one that someone else could write into: in a
// shared temp dir another user could otherwise plant the lock files.
func privateFolder(dir string) error {
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	var st unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR || int(st.Uid) != os.Geteuid() || st.Mode&0o022 != 0 {
		return fmt.Errorf("%s is not a private folder of this user (a symlink, another owner, or writable by others): remove it", dir)
	}
	return nil
}

// commandLine is args as one line, each argument with spaces (or none) quoted.
func commandLine(args []string) string {
	quoted := make([]string, len(args))
	for i, a := range args {
		if a == "" || strings.ContainsAny(a, " \t\n\"'") {
			a = strconv.Quote(a)
		}
		quoted[i] = a
	}
	return strings.Join(quoted, " ")
}
