package backup

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
)

// Link is a symbolic link met in a tree: the walk follows it, and a restore can recreate it.
type Link struct {
	Path   string `json:"path"`   // relative to the tree's root, as seen through the links above it
	Target string `json:"target"` // as written in the link
}

// ErrDanglingLink is wrapped by the error of a walk that met a link whose target is missing: a
// data dir whose member/wal points at an unmounted disk is not complete.
var ErrDanglingLink = errors.New("dangling link")

// ErrSpecialFile is wrapped by the error of a walk that met what is neither a regular file nor a
// folder (a FIFO, a device): etcd keeps none in a data dir, and a copy that left it out would
// pass every check of the files it has. A socket is left out: it holds no data.
var ErrSpecialFile = errors.New("neither a regular file nor a folder")

// Links lists the symbolic links under root (skipping the entries skip names), following the
// links to folders the way Checksum does.
func Links(root string, skip map[string]bool) ([]Link, error) {
	var out []Link
	err := walkFollowing(root, skip, func(string, fs.FileInfo) error { return nil }, func(l Link) { out = append(out, l) })
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, err
}

// walkFollowing calls visit for every entry under root (not root itself), in lexical order,
// with its path relative to root and the FileInfo of what it is after following links: a data
// dir given as a link, and member/wal on its own disk through a link, are walked like plain
// folders. link, when not nil, is told of every link met. A link to a folder that is already
// on the path from / to the entry (member/loop -> ..) is reported to link but not walked again.
// A link whose target is missing is an error wrapping ErrDanglingLink. Entries whose relative
// path skip names are left out, with everything under them.
func walkFollowing(root string, skip map[string]bool, visit func(rel string, info fs.FileInfo) error, link func(Link)) error {
	resolved, err := filepath.EvalSymlinks(root)
	if err != nil {
		if target, lerr := os.Readlink(root); lerr == nil && errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("%s is a link to %s, which does not exist (a disk not mounted?): %w", root, target, ErrDanglingLink)
		}
		return err
	}
	if resolved, err = filepath.Abs(resolved); err != nil {
		return err
	}
	info, err := os.Stat(resolved)
	if err != nil {
		return err
	}
	if !info.IsDir() {
		return visit(".", info) // a file given as the tree, as filepath.WalkDir has it
	}
	// The folders from / down to root count as visited: a link to one of them would walk root
	// again, or a whole filesystem.
	var path []devIno
	for p := resolved; ; p = filepath.Dir(p) {
		if st, err := os.Stat(p); err == nil {
			path = append(path, devInoOf(st))
		}
		if p == filepath.Dir(p) {
			break
		}
	}
	return walkDir(resolved, "", path, skip, visit, link)
}

type devIno struct{ dev, ino uint64 }

func devInoOf(info fs.FileInfo) devIno {
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return devIno{}
	}
	return devIno{uint64(st.Dev), st.Ino}
}

func walkDir(dir, rel string, path []devIno, skip map[string]bool, visit func(string, fs.FileInfo) error, link func(Link)) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		childRel := filepath.Join(rel, e.Name())
		if skip[childRel] {
			continue
		}
		full := filepath.Join(dir, e.Name())
		var info fs.FileInfo
		if e.Type()&fs.ModeSymlink != 0 {
			target, err := os.Readlink(full)
			if err != nil {
				return err
			}
			if link != nil {
				link(Link{Path: childRel, Target: target})
			}
			if info, err = os.Stat(full); errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("%s is a link to %s, which does not exist (a disk not mounted?): %w", childRel, target, ErrDanglingLink)
			} else if err != nil {
				return fmt.Errorf("%s is a link to %s, which cannot be followed: %w", childRel, target, err)
			}
		} else if info, err = e.Info(); err != nil {
			return err
		}
		if info.Mode()&fs.ModeSocket != 0 {
			// A listening socket holds no data, and its server makes it again (etcd's unix://
			// listeners make theirs in its working folder, which may be the data dir).
			continue
		}
		if !info.IsDir() && !info.Mode().IsRegular() {
			return fmt.Errorf("%s is a %s, %w: it cannot be backed up; move it out of %s, then run again", full, specialKind(info.Mode()), ErrSpecialFile, dir)
		}
		id := devInoOf(info)
		if info.IsDir() && onPath(path, id) {
			continue // a loop (member/loop -> ..): its folder is walked already
		}
		if err := visit(childRel, info); err != nil {
			return err
		}
		if info.IsDir() {
			if err := walkDir(full, childRel, append(path[:len(path):len(path)], id), skip, visit, link); err != nil {
				return err
			}
		}
	}
	return nil
}

func onPath(path []devIno, id devIno) bool {
	for _, p := range path {
		if p == id {
			return true
		}
	}
	return false
}

// RequireMemberFiles checks that a backup of a member's data dir holds what a member cannot
// start without: at least one WAL segment and the db, under member/ (a data dir) or at the top
// (the member/ folder itself, given as the tree). A link to an empty mount point yields a
// tree that copies and verifies but holds nothing; this is the check that catches it. Call it
// only for a tree that must hold a member: an empty list fails.
func RequireMemberFiles(files []FileSum) error {
	prefix := "member/"
	if !hasPrefix(files, prefix) && (hasPrefix(files, "wal/") || hasPrefix(files, "snap/")) {
		prefix = ""
	}
	var wal, db bool
	for _, f := range files {
		p := filepath.ToSlash(f.Path)
		if dir, name := filepath.Split(p); dir == prefix+"wal/" && strings.HasSuffix(name, ".wal") {
			wal = true
		}
		if p == prefix+"snap/db" {
			db = true
		}
	}
	switch {
	case !wal && !db:
		return fmt.Errorf("the backup holds no etcd member (no %swal/*.wal, no %ssnap/db): is the data dir, or member/, a link to a disk that is not mounted?", prefix, prefix)
	case !wal:
		return fmt.Errorf("the backup holds no WAL segment (%swal/*.wal): is %swal a link whose target is missing or not mounted?", prefix, prefix)
	case !db:
		return fmt.Errorf("the backup holds no db (%ssnap/db): is %ssnap a link whose target is missing or not mounted?", prefix, prefix)
	}
	return nil
}

func hasPrefix(files []FileSum, prefix string) bool {
	for _, f := range files {
		if strings.HasPrefix(filepath.ToSlash(f.Path), prefix) {
			return true
		}
	}
	return false
}

// TreeSize adds up the sizes of the regular files under root, following links as the copies
// do (a WAL on its own disk counts), each folder once.
func TreeSize(root string, skip map[string]bool) (int64, error) {
	var total int64
	err := walkFollowing(root, skip, func(rel string, info fs.FileInfo) error {
		total += info.Size()
		return nil
	}, nil)
	return total, err
}

// specialKind names what a special file is.
func specialKind(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "named pipe (FIFO)"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeDevice != 0:
		return "device"
	}
	return "special file (" + m.Type().String() + ")"
}
