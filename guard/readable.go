package guard

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/etcdmedic/etcdmedic/finding"
)

// CheckReadable returns an UNREADABLE verdict, and false, when the user etcdmedic runs as
// cannot read the data dir or what etcd and PD keep in it (its member/ tree, a PD join file).
// Data it cannot read it cannot judge: a member/ it cannot list looks like "not etcd data",
// which is how such a dir used to be called FOREIGN and handed to --fix. A data dir that does
// not exist is readable (EMPTY).
func CheckReadable(dataDir string) (Verdict, bool) {
	path, err := firstUnreadable(dataDir)
	if err == nil {
		return Verdict{}, true
	}
	out := verdict(Unreadable, fmt.Sprintf("etcdmedic runs as %s and cannot read %s (%v): it cannot tell whose data this is, so it neither judges nor moves it. Run guard as the data dir's owner (%s) or as root", currentUser(), path, errors.Unwrap(err), ownerOf(path)))
	out.Evidence = []finding.Evidence{
		{What: "unreadable", Value: path},
		{What: "etcdmedic runs as", Value: currentUser()},
		{What: "owner", Value: ownerOf(path)},
	}
	return out, false
}

// firstUnreadable walks the data dir's own entries and returns the first that cannot be read,
// with a permission error; other errors (a file gone meanwhile) are left to the inspection.
func firstUnreadable(dataDir string) (string, error) {
	st, err := os.Stat(dataDir)
	switch {
	case errors.Is(err, fs.ErrPermission):
		return dataDir, err
	case err != nil || !st.IsDir():
		return "", nil
	}
	ents, err := os.ReadDir(dataDir)
	if errors.Is(err, fs.ErrPermission) {
		return dataDir, err
	}
	for _, e := range ents {
		if e.Name() != "member" && e.Name() != "join" {
			continue // lost+found is root's own, and not etcd's
		}
		var bad string
		var badErr error
		filepath.WalkDir(filepath.Join(dataDir, e.Name()), func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() && d.Type().IsRegular() {
				var f *os.File
				if f, err = os.Open(p); err == nil {
					f.Close()
				}
			}
			if errors.Is(err, fs.ErrPermission) {
				bad, badErr = p, err
				return filepath.SkipAll
			}
			return nil
		})
		if badErr != nil {
			return bad, badErr
		}
	}
	return "", nil
}

func currentUser() string {
	uid := os.Geteuid()
	if u, err := user.LookupId(strconv.Itoa(uid)); err == nil {
		return fmt.Sprintf("%s (uid %d)", u.Username, uid)
	}
	return fmt.Sprintf("uid %d", uid)
}

// ownerOf names the owner of path, "unknown" when even its inode cannot be read.
func ownerOf(path string) string {
	st, err := os.Stat(path)
	if err != nil {
		return "unknown"
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return "unknown"
	}
	uid := strconv.FormatUint(uint64(sys.Uid), 10)
	if u, err := user.LookupId(uid); err == nil {
		return fmt.Sprintf("%s (uid %s), mode %v", u.Username, uid, st.Mode().Perm())
	}
	return fmt.Sprintf("uid %s, mode %v", uid, st.Mode().Perm())
}
