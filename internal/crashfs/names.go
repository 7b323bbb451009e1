package crashfs

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// changeKind is what a directory change did, which says how a cut undoes it.
type changeKind int

const (
	// entryCreated added an entry (create, mknod, mkdir, symlink, link): undone by removing it.
	entryCreated changeKind = iota
	// entryRemoved moved an entry into the stash (unlink, rmdir): undone by moving it back.
	entryRemoved
	// entryRenamed moved an entry, a replaced target into the stash: undone by moving both back.
	entryRenamed
	// entriesExchanged swapped two entries (RENAME_EXCHANGE): undone by swapping them again.
	entriesExchanged
)

// nameChange is one change to directory entries, with what it takes to undo it.
type nameChange struct {
	seq  uint64
	kind changeKind
	verb string // the operation, for reports: "create", "unlink", "rename", ...
	// dirs are the inode numbers of the directories changed; dirs[1] is 0 unless a rename
	// spans two directories.
	dirs [2]uint64
	// path is the entry (the old name, for a rename), relative to the backing dir; to is the
	// new name of a rename or exchange.
	path, to string
	// stash is where the removed entry, or the target a rename replaced, waits (relative to
	// the backing dir); "" if none.
	stash string
}

// nameLog holds the directory changes no directory fsync has made durable, in the order they
// happened: what a cut undoes, newest first.
type nameLog struct {
	changes []nameChange
	// lastChange maps a directory's inode number to the seq of its newest change in changes.
	lastChange map[uint64]uint64
}

func (l *nameLog) add(c nameChange) {
	l.changes = append(l.changes, c)
	for _, dir := range c.dirs {
		if dir != 0 {
			l.lastChange[dir] = c.seq
		}
	}
}

// syncDir is an fsync of directory dir: its changes become durable, and so does every change
// before its newest one, as in a journaling filesystem's ordered log. Removals made durable
// let go of their stashed entries.
func (l *nameLog) syncDir(dir uint64, backing string) {
	upTo, ok := l.lastChange[dir]
	if !ok {
		return
	}
	durable := 0
	for durable < len(l.changes) && l.changes[durable].seq <= upTo {
		if stash := l.changes[durable].stash; stash != "" {
			_ = os.RemoveAll(filepath.Join(backing, stash)) // best effort: Mount clears the stash anyway
		}
		durable++
	}
	l.changes = append([]nameChange(nil), l.changes[durable:]...)
	for d, seq := range l.lastChange {
		if seq <= upTo {
			delete(l.lastChange, d)
		}
	}
}

// undoAll undoes every change, newest first, and returns what it undid.
func (l *nameLog) undoAll(backing string) ([]string, error) {
	var undone []string
	var errs []error
	for i := len(l.changes) - 1; i >= 0; i-- {
		c := l.changes[i]
		if err := c.undo(backing); err != nil {
			errs = append(errs, fmt.Errorf("undo %s: %w", c, err))
		}
		undone = append(undone, c.String())
	}
	*l = nameLog{lastChange: map[uint64]uint64{}}
	return undone, errors.Join(errs...)
}

func (c nameChange) undo(backing string) error {
	path := filepath.Join(backing, c.path)
	switch c.kind {
	case entryCreated:
		return os.Remove(path)
	case entryRemoved:
		return unix.Rename(filepath.Join(backing, c.stash), path)
	case entryRenamed:
		to := filepath.Join(backing, c.to)
		if err := unix.Rename(to, path); err != nil {
			return err
		}
		if c.stash != "" {
			return unix.Rename(filepath.Join(backing, c.stash), to)
		}
		return nil
	case entriesExchanged:
		return unix.Renameat2(unix.AT_FDCWD, filepath.Join(backing, c.to), unix.AT_FDCWD, path, unix.RENAME_EXCHANGE)
	}
	return fmt.Errorf("unknown change kind %d", c.kind)
}

// String says what the change did, as a cut report lists it.
func (c nameChange) String() string {
	switch c.kind {
	case entryRenamed:
		return fmt.Sprintf("rename %s -> %s", c.path, c.to)
	case entriesExchanged:
		return fmt.Sprintf("exchange %s <-> %s", c.path, c.to)
	}
	return c.verb + " " + c.path
}

// created logs that verb added name to dir. Callers hold mu.
func (f *FS) created(verb string, dir *node, name string) nameChange {
	return nameChange{seq: f.nextSeq(), kind: entryCreated, verb: verb, dirs: [2]uint64{dir.ino()}, path: filepath.Join(dir.rel(), name)}
}

// stashPath is where the entry removed by change seq waits, relative to the backing dir.
func stashPath(seq uint64) string {
	return filepath.Join(stashName, strconv.FormatUint(seq, 10))
}

// remove is unlink or rmdir (verb) of name in dir: the entry moves into the stash. Callers
// hold mu.
func (f *FS) remove(verb string, dir *node, name string) syscall.Errno {
	path := filepath.Join(dir.rel(), name)
	full := filepath.Join(f.backing, path)
	var st unix.Stat_t
	if err := unix.Lstat(full, &st); err != nil {
		return errnoOf(err)
	}
	isDir := st.Mode&unix.S_IFMT == unix.S_IFDIR
	switch {
	case verb == "unlink" && isDir:
		return syscall.EISDIR
	case verb == "rmdir" && !isDir:
		return syscall.ENOTDIR
	case isDir:
		if errno := checkEmpty(full); errno != 0 {
			return errno
		}
	}
	seq := f.nextSeq()
	stash := stashPath(seq)
	if err := unix.Rename(full, filepath.Join(f.backing, stash)); err != nil {
		return errnoOf(err)
	}
	f.names.add(nameChange{seq: seq, kind: entryRemoved, verb: verb, dirs: [2]uint64{dir.ino()}, path: path, stash: stash})
	return 0
}

// rename moves name in from to newName in to. A target it replaces goes to the stash first:
// a file by a hard link, so the rename stays atomic; an empty directory by a move. Callers
// hold mu.
func (f *FS) rename(from *node, name string, to *node, newName string, flags uint32) syscall.Errno {
	oldPath, newPath := filepath.Join(from.rel(), name), filepath.Join(to.rel(), newName)
	oldFull, newFull := filepath.Join(f.backing, oldPath), filepath.Join(f.backing, newPath)
	change := nameChange{kind: entryRenamed, verb: "rename", dirs: [2]uint64{from.ino(), to.ino()}, path: oldPath, to: newPath}
	if change.dirs[0] == change.dirs[1] {
		change.dirs[1] = 0
	}
	if flags&unix.RENAME_EXCHANGE != 0 {
		if err := unix.Renameat2(unix.AT_FDCWD, oldFull, unix.AT_FDCWD, newFull, unix.RENAME_EXCHANGE); err != nil {
			return errnoOf(err)
		}
		change.seq, change.kind, change.verb = f.nextSeq(), entriesExchanged, "exchange"
		f.names.add(change)
		return 0
	}
	if flags&^unix.RENAME_NOREPLACE != 0 {
		return syscall.EINVAL // RENAME_WHITEOUT is for overlay filesystems
	}
	var src, dst unix.Stat_t
	if err := unix.Lstat(oldFull, &src); err != nil {
		return errnoOf(err)
	}
	err := unix.Lstat(newFull, &dst)
	if err != nil && !errors.Is(err, unix.ENOENT) {
		return errnoOf(err)
	}
	replaces := err == nil
	if replaces && src.Ino == dst.Ino && src.Dev == dst.Dev {
		return 0 // two names of one file: rename does nothing
	}
	if replaces && flags&unix.RENAME_NOREPLACE != 0 {
		return syscall.EEXIST
	}
	change.seq = f.nextSeq()
	if !replaces {
		if err := unix.Renameat2(unix.AT_FDCWD, oldFull, unix.AT_FDCWD, newFull, uint(flags)); err != nil {
			return errnoOf(err)
		}
		f.names.add(change)
		return 0
	}
	change.stash = stashPath(change.seq)
	if errno := f.replace(oldFull, newFull, filepath.Join(f.backing, change.stash), &src, &dst); errno != 0 {
		return errno
	}
	f.names.add(change)
	return 0
}

// replace renames oldFull over newFull, keeping the replaced target at stash.
func (f *FS) replace(oldFull, newFull, stash string, src, dst *unix.Stat_t) syscall.Errno {
	srcDir, dstDir := src.Mode&unix.S_IFMT == unix.S_IFDIR, dst.Mode&unix.S_IFMT == unix.S_IFDIR
	switch {
	case dstDir && !srcDir:
		return syscall.EISDIR
	case !dstDir && srcDir:
		return syscall.ENOTDIR
	case dstDir:
		if errno := checkEmpty(newFull); errno != 0 {
			return errno
		}
		if err := unix.Rename(newFull, stash); err != nil {
			return errnoOf(err)
		}
		if err := unix.Rename(oldFull, newFull); err != nil {
			_ = unix.Rename(stash, newFull)
			return errnoOf(err)
		}
		return 0
	}
	if err := unix.Link(newFull, stash); err != nil {
		return errnoOf(err)
	}
	if err := unix.Rename(oldFull, newFull); err != nil {
		_ = unix.Unlink(stash)
		return errnoOf(err)
	}
	return 0
}

// checkEmpty answers ENOTEMPTY for a directory with entries.
func checkEmpty(dir string) syscall.Errno {
	d, err := os.Open(dir)
	if err != nil {
		return errnoOf(err)
	}
	defer d.Close()
	names, err := d.Readdirnames(1)
	if len(names) > 0 {
		return syscall.ENOTEMPTY
	}
	if err != nil && !errors.Is(err, io.EOF) {
		return errnoOf(err)
	}
	return 0
}
