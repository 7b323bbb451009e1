package guard

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/etcdmedic/etcdmedic/backup"
	"github.com/etcdmedic/etcdmedic/datadir"
	"github.com/etcdmedic/etcdmedic/plan"
)

// Manifest records what a quarantine holds, with checksums, so that anyone can prove later
// that nothing was lost.
type Manifest struct {
	Source string `json:"source"` // the data dir as given, absolute
	// RealSource is Source with its links resolved: where the files were moved from.
	RealSource string    `json:"realSource,omitempty"`
	CreatedAt  time.Time `json:"createdAt"`
	// Class and Reason are why the data dir was moved aside (a Reason's Class and Why).
	Class  Class  `json:"class"`
	Reason string `json:"reason"`
	// Entries are the top-level names moved: a resumed quarantine moves these and nothing else.
	Entries []string         `json:"entries"`
	Files   []backup.FileSum `json:"files"`
	Bytes   int64            `json:"bytes"`
	// SumsFrom is set when the checksums were not computed here but taken from a verified
	// backup of the same files, unchanged since (same sizes and modification times).
	SumsFrom string `json:"sumsFrom,omitempty"`
	// Links are the symbolic links in the data dir (member/wal on its own disk): Files are summed
	// through them. An absolute link moves with its folder, and its target stays where it is.
	Links []backup.Link `json:"links,omitempty"`
	// WAL is the member's WAL dir when it lives apart (--wal-dir): quarantined beside itself.
	WAL *ApartWAL `json:"wal,omitempty"`
}

// Quarantined says where a data dir's contents went.
type Quarantined struct {
	Dir   string `json:"dir"` // holds manifest.json, report.json and data/
	Files int    `json:"files"`
	Bytes int64  `json:"bytes"`
	// WALDir holds the WAL (in wal/) when it lived apart from the data dir.
	WALDir string `json:"walDir,omitempty"`
	// Note says what the operator must know about where it is: inside the data dir's volume.
	Note string `json:"note,omitempty"`
}

const partialSuffix = ".partial"

// Reason is why a data dir is moved aside: what it was found to be, and the operator's
// sentence for it. Its quarantine's manifest records both.
type Reason struct {
	Class Class
	Why   string
}

// check refuses a reason that does not say why, or whose class is not one that moves: only
// another cluster's (or no one's) data and a removed member's are moved aside; the others
// stay where they are (see each Class).
func (r Reason) check() error {
	switch r.Class {
	case Foreign, Removed:
	default:
		return fmt.Errorf("a data dir found %q is not moved aside", r.Class)
	}
	if strings.TrimSpace(r.Why) == "" {
		return fmt.Errorf("a quarantine of %s data needs a reason for its manifest", r.Class)
	}
	return nil
}

// Quarantine moves aside a data dir that Classify found a member may not start on, refusing
// one the verdict says must not move (a live member's, another program's files). It is
// QuarantineFor with the verdict's class and reason.
func Quarantine(dataDir string, report *datadir.Report, v Verdict, now time.Time) (*Quarantined, error) {
	if !v.Movable {
		return nil, fmt.Errorf("%s is %s and must not be moved: %s", dataDir, v.Class, v.Reason)
	}
	return QuarantineFor(dataDir, report, Reason{Class: v.Class, Why: v.Reason}, now)
}

// QuarantineFor moves the contents of dataDir aside into a quarantine folder on the same
// filesystem, for why (recorded in the manifest): a manifest with every file's checksum and
// the inspect report first, then the entries, one rename each, then a check of every checksum.
// Nothing is deleted. Interrupted at any point, running it again finishes the same quarantine.
func QuarantineFor(dataDir string, report *datadir.Report, why Reason, now time.Time) (*Quarantined, error) {
	if err := why.check(); err != nil {
		return nil, err
	}
	return quarantine(dataDir, report, why, now, nil, "")
}

// QuarantineKnown is QuarantineFor for a data dir whose files were just summed elsewhere (a
// verified backup, named by from): when every file still has the size and modification time
// it had then, those sums are used, and after the move (renames, which cannot change a byte)
// the files are checked by size and time instead of read again. Otherwise it is QuarantineFor.
func QuarantineKnown(dataDir string, report *datadir.Report, why Reason, now time.Time, known []backup.FileSum, from string) (*Quarantined, error) {
	if err := why.check(); err != nil {
		return nil, err
	}
	return quarantine(dataDir, report, why, now, known, from)
}

func quarantine(dataDir string, report *datadir.Report, why Reason, now time.Time, known []backup.FileSum, from string) (*Quarantined, error) {
	given, err := filepath.Abs(dataDir)
	if err != nil {
		return nil, err
	}
	// A data dir given as a link (/var/lib/etcd -> /mnt/disk1/etcd) is quarantined where its
	// files are, on their filesystem.
	dataDir, err = filepath.EvalSymlinks(given)
	if err != nil {
		return nil, fmt.Errorf("resolve %s: %w", given, err)
	}
	release, err := holdMemberLocks(dataDir)
	if err != nil {
		return nil, err
	}
	defer release()
	wal, err := apartWAL(report, dataDir)
	if err != nil {
		return nil, err
	}
	if wal != nil {
		if err := walLocked(wal.RealSource); err != nil {
			return nil, err
		}
	}
	base, err := quarantineBase(dataDir)
	if err != nil {
		return nil, err
	}
	partial, err := findPartial(base)
	if err != nil {
		return nil, err
	}
	m, haveManifest, err := resumedManifest(partial, given, dataDir)
	if err != nil {
		return nil, err
	}
	entries := topLevel(dataDir)
	if haveManifest {
		entries = m.Entries
	}
	data := filepath.Join(partial, "data")
	if partial == "" {
		data = filepath.Join(base, "new", "data") // not there yet: its filesystem is base's
	}
	// Refused here, nothing has moved and no quarantine folder was made for it.
	if err := movable(dataDir, entries, data); err != nil {
		if partial != "" {
			return nil, fmt.Errorf("%w; nothing more was moved (the quarantine %s is unfinished)", err, partial)
		}
		return nil, fmt.Errorf("%w; nothing was moved", err)
	}
	if haveManifest {
		wal = m.WAL // what the interrupted run started to move, nothing else
		if wal != nil {
			if err := walLocked(wal.RealSource); err != nil {
				return nil, err
			}
		}
	} else if wal != nil {
		walBase, err := walQuarantineBase(wal.RealSource)
		if err != nil {
			return nil, fmt.Errorf("%w; nothing was moved", err)
		}
		if err := movable(wal.RealSource, wal.Entries, filepath.Join(walBase, "new", "wal")); err != nil {
			return nil, fmt.Errorf("the WAL dir: %w; nothing was moved", err)
		}
	}
	if !haveManifest {
		// Nothing has moved yet: checksum everything where it is (a link whose target is
		// missing refuses here, before a quarantine folder is made).
		m = Manifest{Source: given, RealSource: dataDir, CreatedAt: now.UTC(), Class: why.Class, Reason: why.Why, Entries: entries, WAL: wal}
		if err := m.sum(dataDir, known, from); err != nil {
			return nil, fmt.Errorf("%w; nothing was moved", err)
		}
		if wal != nil {
			if err := wal.sum(); err != nil {
				return nil, fmt.Errorf("%w; nothing was moved", err)
			}
		}
	}
	if partial == "" {
		partial = filepath.Join(base, fmt.Sprintf("%s-%s%s", now.UTC().Format("20060102T150405Z"), strings.ToLower(string(why.Class)), partialSuffix))
		// Synced with its parents before anything moves into it (MkdirAllSynced).
		if err := backup.MkdirAllSynced(partial); err != nil {
			return nil, fmt.Errorf("create quarantine folder: %w", err)
		}
		data = filepath.Join(partial, "data")
	}
	final := strings.TrimSuffix(partial, partialSuffix)
	if wal != nil {
		// The WAL half's folder exists (its name in the manifest) before the manifest does.
		if err := wal.prepare(filepath.Base(partial)); err != nil {
			return nil, fmt.Errorf("create the WAL dir's quarantine folder: %w", err)
		}
	}
	if !haveManifest {
		if err := backup.WriteJSONAtomic(filepath.Join(partial, "manifest.json"), m); err != nil {
			return nil, err
		}
		if err := backup.WriteJSONAtomic(filepath.Join(partial, "report.json"), report); err != nil {
			return nil, err
		}
		plan.Crashpoint("quarantine:manifest")
	}
	// data/ and the folder naming it must survive a power cut before the first entry is
	// renamed out of the data dir into it.
	if err := backup.MkdirAllSynced(data); err != nil {
		return nil, err
	}
	// Only what the manifest lists moves; anything that appeared since is a conflict for a person.
	listed := map[string]bool{}
	for _, name := range m.Entries {
		listed[name] = true
	}
	for _, name := range topLevel(dataDir) {
		if !listed[name] {
			return nil, fmt.Errorf("%s appeared in %s after the quarantine %s started: compare by hand; nothing was moved over it", name, dataDir, partial)
		}
	}
	if wal != nil {
		// The log first: until the data dir's own entries move, the member's db is where it was.
		if err := wal.move(filepath.Join(final, "manifest.json")); err != nil {
			return nil, err
		}
		plan.Crashpoint("quarantine:wal-moved") // half a member left: its db without its log
	}
	for _, name := range m.Entries {
		src := filepath.Join(dataDir, name)
		if _, err := os.Lstat(src); errors.Is(err, fs.ErrNotExist) {
			continue // moved by the interrupted run
		}
		if err := renameNoReplace(src, filepath.Join(data, name)); err != nil {
			if errors.Is(err, unix.EXDEV) && wal == nil && allThere(dataDir, m.Entries) && unmake(partial) == nil {
				// A mount the checks did not see: refused before anything moved, and the folder
				// held only etcdmedic's own files, so no unfinished quarantine is left behind.
				return nil, fmt.Errorf("move %s into quarantine: %w; nothing was moved: every file is still in %s", name, err, dataDir)
			}
			return nil, fmt.Errorf("move %s into quarantine: %w", name, err)
		}
	}
	if err := backup.SyncDir(data); err != nil {
		return nil, err
	}
	if err := backup.SyncDir(dataDir); err != nil {
		return nil, err
	}
	plan.Crashpoint("quarantine:moved")
	check := backup.Verify
	if m.SumsFrom != "" {
		check = func(root string, want []backup.FileSum) error {
			if !backup.Unchanged(root, want, nil) {
				return errors.New("a file's size or modification time changed in the move")
			}
			return nil
		}
	}
	if err := check(data, m.Files); err != nil {
		return nil, fmt.Errorf("quarantine %s does not match its manifest (nothing was deleted; the data is in %s): %w", partial, data, err)
	}
	if err := os.Rename(partial, final); err != nil {
		return nil, err
	}
	if err := backup.SyncDir(base); err != nil {
		return nil, err
	}
	q := &Quarantined{Dir: final, Files: len(m.Files), Bytes: m.Bytes}
	if insideVolume(base, dataDir) {
		q.Note = fmt.Sprintf("the quarantine is inside the data dir %s, on its own volume (a mount point): it goes with that volume. kubeadm reset, or a released PV's cleanup, deletes it with everything else: copy it elsewhere first if it may be needed", dataDir)
	}
	if wal != nil {
		q.Files, q.Bytes, q.WALDir = q.Files+len(wal.Files), q.Bytes+wal.Bytes, wal.Dir
	}
	return q, nil
}

// resumedManifest reads the manifest of an unfinished quarantine (partial; "" for none), if it
// got as far as writing one, and checks that it is of this data dir (given, resolved).
func resumedManifest(partial, given, resolved string) (Manifest, bool, error) {
	var m Manifest
	if partial == "" {
		return m, false, nil
	}
	manifestPath := filepath.Join(partial, "manifest.json")
	if err := backup.ReadJSON(manifestPath, &m); errors.Is(err, fs.ErrNotExist) {
		return m, false, nil
	} else if err != nil {
		return m, false, fmt.Errorf("read %s: %w", manifestPath, err)
	}
	// A manifest written before RealSource was recorded names the data dir as it was given.
	same := m.RealSource == resolved || (m.RealSource == "" && (m.Source == given || m.Source == resolved))
	if !same {
		return m, false, fmt.Errorf("the unfinished quarantine %s is of %s, not %s: finish or move it by hand first", partial, m.Source, given)
	}
	return m, true, nil
}

// sum fills the manifest's links and checksums from the data dir, following its links; known
// sums (from, a verified backup) are taken when every file is unchanged since.
func (m *Manifest) sum(dataDir string, known []backup.FileSum, from string) error {
	links, err := backup.Links(dataDir, datadir.Ignorable)
	if err != nil {
		return fmt.Errorf("list the links in %s: %w", dataDir, err)
	}
	m.Links = links
	if known != nil && backup.Unchanged(dataDir, known, datadir.Ignorable) {
		m.Files, m.SumsFrom, m.Bytes = known, from, 0
		for _, f := range known {
			m.Bytes += f.Size
		}
		return nil
	}
	if m.Files, m.Bytes, err = backup.Checksum(dataDir, datadir.Ignorable); err != nil {
		return fmt.Errorf("checksum %s: %w", dataDir, err)
	}
	return nil
}

// movable checks, before anything moves, that each entry of dataDir still there can be renamed
// into data (the same filesystem: a mount point cannot be) and that every link in them will
// point at the same file from data: a relative one must stay inside the data dir, an absolute
// one must point outside it. A move that would fail, or leave a link dangling, halfway is
// refused up front.
func movable(dataDir string, entries []string, data string) error {
	dest, err := mountOf(existingAncestor(data))
	if err != nil {
		return err
	}
	for _, name := range entries {
		src := filepath.Join(dataDir, name)
		at, err := mountOf(src)
		if errors.Is(err, fs.ErrNotExist) {
			continue // moved by an interrupted run
		}
		if err != nil {
			return err
		}
		if at != dest {
			return fmt.Errorf("%s is on another mount than the quarantine %s (a mount point?): a rename cannot move it; move it by hand", name, data)
		}
		err = filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.Type()&fs.ModeSymlink == 0 {
				return nil
			}
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(dataDir, p)
			if !filepath.IsAbs(target) {
				if escapes(filepath.Join(filepath.Dir(rel), target)) {
					return fmt.Errorf("%s is a relative link (%s) that would dangle once moved: make it absolute or move it by hand", rel, target)
				}
				return nil
			}
			// An absolute link is left pointing where it did, unless that is inside what moves.
			if to, err := filepath.EvalSymlinks(p); err == nil {
				if in, err := filepath.Rel(dataDir, to); err == nil && !escapes(in) {
					return fmt.Errorf("%s is an absolute link (%s) into the data dir itself that would dangle once moved: make it relative or move it by hand", rel, target)
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// allThere is true when every entry is still in dir: nothing has moved.
func allThere(dir string, entries []string) bool {
	for _, name := range entries {
		if _, err := os.Lstat(filepath.Join(dir, name)); err != nil {
			return false
		}
	}
	return true
}

// unmake removes a quarantine folder that received nothing but its manifest and report; it
// fails, removing what it could of those two, if anything else is there.
func unmake(partial string) error {
	for _, f := range []string{"manifest.json", "report.json"} {
		if err := os.Remove(filepath.Join(partial, f)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	if err := os.Remove(filepath.Join(partial, "data")); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return os.Remove(partial)
}

// escapes reports whether a path relative to the data dir leaves it: a relative link to it
// would point elsewhere once the data dir's contents moved.
func escapes(rel string) bool {
	rel = filepath.Clean(rel)
	return rel == ".." || strings.HasPrefix(rel, "../")
}

// existingAncestor is p, or its nearest parent that exists: the filesystem p will be made on.
func existingAncestor(p string) string {
	for {
		if _, err := os.Lstat(p); err == nil || p == filepath.Dir(p) {
			return p
		}
		p = filepath.Dir(p)
	}
}

// topLevel lists a data dir's own entries (not lost+found, not etcdmedic's quarantine).
func topLevel(dir string) []string {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var names []string
	for _, e := range ents {
		if !datadir.Ignorable[e.Name()] {
			names = append(names, e.Name())
		}
	}
	return names
}

// renameNoReplace renames, refusing to replace an existing target.
func renameNoReplace(src, dst string) error {
	err := unix.Renameat2(unix.AT_FDCWD, src, unix.AT_FDCWD, dst, unix.RENAME_NOREPLACE)
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) { // filesystems without it
		if _, serr := os.Lstat(dst); serr == nil {
			return fmt.Errorf("%s already exists", dst)
		}
		return os.Rename(src, dst)
	}
	return err
}

// holdMemberLocks refuses to move a data dir that a running etcd holds, and keeps an
// exclusive lock on its db while the contents move, so that etcd cannot open it meanwhile.
func holdMemberLocks(dataDir string) (func(), error) {
	if datadir.RunningOn(dataDir) {
		return nil, fmt.Errorf("a process runs on %s (its WAL or db is locked): stop it first", dataDir)
	}
	db, err := os.Open(filepath.Join(dataDir, "member", "snap", "db"))
	if err != nil {
		return func() {}, nil // no db, nothing to hold
	}
	if err := unix.Flock(int(db.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		db.Close()
		return nil, fmt.Errorf("the db in %s is locked by a running process: stop it first", dataDir)
	}
	return func() { unix.Flock(int(db.Fd()), unix.LOCK_UN); db.Close() }, nil
}

// quarantineBase is where quarantines of dataDir go: beside it (<dataDir>.etcdmedic-quarantine)
// when its parent is on the same mount, else inside it (a volume's mount point, a bind mount).
func quarantineBase(dataDir string) (string, error) {
	beside, err := sameMount(dataDir, filepath.Dir(dataDir))
	if err != nil {
		return "", err
	}
	if beside {
		return dataDir + datadir.QuarantineFolder, nil
	}
	return filepath.Join(dataDir, datadir.QuarantineFolder), nil
}

// walQuarantineBase is where the quarantine of a WAL dir apart goes: beside it, on its mount.
// Never inside it: etcd's wal.Create starts by removing everything in the WAL dir (os.RemoveAll),
// a quarantine there included. A WAL dir that is a mount point of its own is refused.
func walQuarantineBase(walDir string) (string, error) {
	beside, err := sameMount(walDir, filepath.Dir(walDir))
	if err != nil {
		return "", err
	}
	if !beside {
		return "", fmt.Errorf("the WAL dir %s is a mount point: its quarantine can go neither beside it (another mount: a rename cannot cross) nor inside it (etcd's WAL creation removes everything in the WAL dir, a quarantine too). Move its files by hand to a folder on that mount outside the WAL dir, or onto another disk with a copy checked by sha256, and run guard again", walDir)
	}
	return walDir + datadir.QuarantineFolder, nil
}

// insideVolume is true when base (from quarantineBase) is inside dataDir: a mount point's
// quarantine lives on its volume, and goes with it (kubeadm reset, a PV's cleanup).
func insideVolume(base, dataDir string) bool {
	return strings.HasPrefix(base, dataDir+string(filepath.Separator))
}

// mountKey says which mount a path is on: its device and mount ID (0 on kernels before 5.8,
// which do not tell it; the device alone then).
type mountKey struct{ dev, id uint64 }

// sameMount is true when a and b (links not followed) are on one mount. rename(2) cannot cross
// mounts, even two bind mounts of one filesystem (EXDEV), which st_dev alone does not tell.
func sameMount(a, b string) (bool, error) {
	ka, err := mountOf(a)
	if err != nil {
		return false, err
	}
	kb, err := mountOf(b)
	if err != nil {
		return false, err
	}
	return ka == kb, nil
}

// statx is unix.Statx; tests take it away as old kernels and seccomp profiles do.
var statx = unix.Statx

func mountOf(p string) (mountKey, error) {
	var st unix.Statx_t
	err := statx(unix.AT_FDCWD, p, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_MNT_ID, &st)
	if errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EPERM) {
		// No statx (a kernel before 4.11, RHEL 7's; a seccomp profile that refuses it): the
		// device alone, as before mount IDs were asked.
		var lst unix.Stat_t
		if err := unix.Lstat(p, &lst); err != nil {
			return mountKey{}, &fs.PathError{Op: "lstat", Path: p, Err: err}
		}
		return mountKey{dev: lst.Dev}, nil
	}
	if err != nil {
		return mountKey{}, &fs.PathError{Op: "statx", Path: p, Err: err}
	}
	k := mountKey{dev: unix.Mkdev(st.Dev_major, st.Dev_minor)}
	if st.Mask&unix.STATX_MNT_ID != 0 {
		k.id = st.Mnt_id
	}
	return k, nil
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
	if err := backup.Verify(filepath.Join(dir, "data"), m.Files); err != nil {
		return err
	}
	if m.WAL != nil {
		return backup.Verify(filepath.Join(m.WAL.Dir, "wal"), m.WAL.Files)
	}
	return nil
}
