package plan

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
	"syscall"

	"github.com/etcdmedic/etcdmedic/backup"
)

// File is the name of a plan in its folder; the journal sits beside it.
const File = "plan.json"

// ErrEdited means a plan file was changed after it was made.
var ErrEdited = errors.New("the plan was changed since it was made (its checksum does not match): make a new plan instead of editing one")

// envelope holds a plan with the checksum of its exact bytes. The checksum is an integrity
// check (a plan edited by hand, or torn), not a signature: anyone who can write the file can
// recompute it. What keeps a plan trusted is that only the user running etcdmedic can write
// its folder and file (CheckPrivate).
type envelope struct {
	Checksum string          `json:"checksum"`
	Plan     json.RawMessage `json:"plan"`
}

// ErrFolderUsed means a plan folder already holds a plan or the journal of one: a new plan is
// made in a new folder.
var ErrFolderUsed = errors.New("the plan folder is in use")

// FolderUsedError is a plan folder that holds Found (plan.json or journal.jsonl).
type FolderUsedError struct {
	Dir   string
	Found string
}

func (e *FolderUsedError) Error() string {
	if e.Found == File {
		return fmt.Sprintf("%s already holds a plan: apply it, or make the new plan in a new folder (a new --plan-dir)", e.Dir)
	}
	// Journal entries are keyed by step IDs, which repeat from plan to plan ("snapshot",
	// "hop0:m1"): a new plan beside an old journal would take its steps as done.
	return fmt.Sprintf("%s holds the journal of an earlier plan (%s): a new plan there would take its steps as done; make the new plan in a new folder (a new --plan-dir), and keep the journal: it records what was done", e.Dir, e.Found)
}

func (e *FolderUsedError) Is(target error) bool { return target == ErrFolderUsed }

// CheckUnused refuses a plan folder that already holds a plan or a journal (FolderUsedError),
// or that someone else could write (CheckPrivate). A folder that does not exist yet passes.
func CheckUnused(dir string) error {
	if err := CheckPrivate(dir); err != nil {
		return err
	}
	for _, name := range []string{File, JournalFile} {
		_, err := os.Lstat(filepath.Join(dir, name))
		if err == nil {
			return &FolderUsedError{Dir: dir, Found: name}
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

// Save writes v as the plan in dir (created if needed), with a checksum. It never writes into a
// folder that holds a plan or a journal already (CheckUnused).
func Save(dir string, v any) error {
	// A new plan folder is fsynced into its parent before anything is done by the plan.
	if err := backup.MkdirAllSynced(dir); err != nil {
		return err
	}
	if err := CheckUnused(dir); err != nil {
		return err
	}
	body, err := json.MarshalIndent(v, "  ", "  ")
	if err != nil {
		return err
	}
	sum := sha256.Sum256(body)
	return backup.WriteJSONAtomic(filepath.Join(dir, File), envelope{Checksum: hex.EncodeToString(sum[:]), Plan: body})
}

// Load reads the plan in dir into v; a missing plan is fs.ErrNotExist, an edited one ErrEdited,
// a folder, plan or journal that someone else could have written ErrNotPrivate.
func Load(dir string, v any) error {
	path := filepath.Join(dir, File)
	b, err := readPrivate(dir)
	if err != nil {
		return err
	}
	var env envelope
	if err := json.Unmarshal(b, &env); err != nil || len(env.Plan) == 0 {
		return fmt.Errorf("%s is not a plan etcdmedic wrote", path)
	}
	sum := sha256.Sum256(env.Plan)
	if hex.EncodeToString(sum[:]) != env.Checksum {
		return fmt.Errorf("%s: %w", path, ErrEdited)
	}
	if err := json.Unmarshal(env.Plan, v); err != nil {
		return fmt.Errorf("%s is not a plan etcdmedic wrote: %v", path, err)
	}
	return nil
}

// IsMissing reports whether Load found no plan.
func IsMissing(err error) bool { return errors.Is(err, fs.ErrNotExist) }

// ErrNotPrivate means a plan folder or file could have been written by someone other than the
// user running etcdmedic. A plan says which binary runs as the members, with which flags, and
// which data dirs are moved: apply runs it only as its owner wrote it.
var ErrNotPrivate = errors.New("etcdmedic writes and applies plans only in a folder, and from files, owned by the user running it and writable by no one else")

// NotPrivateError is one plan folder or file that fails the check, and why.
type NotPrivateError struct {
	Path string
	Why  string // "is owned by uid 65534, not by uid 0 running etcdmedic"
	Fix  string // the commands that make it private, once the plan is known to be unchanged
}

func (e *NotPrivateError) Error() string {
	return fmt.Sprintf("%s %s: %v; nothing was done. Check that no one changed the plan, then %s (or make a new plan in a new folder)", e.Path, e.Why, ErrNotPrivate, e.Fix)
}

func (e *NotPrivateError) Is(target error) bool { return target == ErrNotPrivate }

// CheckPrivate refuses a plan folder that exists and that another user owns or that its group
// or others can write, and likewise the plan and journal in it. A folder that does not exist
// yet passes: Save creates it 0700. Root is no exception: root applying another user's plan
// would run, as root, whatever that user wrote.
func CheckPrivate(dir string) error {
	st, err := os.Stat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if !st.IsDir() {
		return fmt.Errorf("%s is not a folder: give the plan folder", dir)
	}
	if err := checkPrivate(dir, st); err != nil {
		return err
	}
	for _, name := range []string{File, JournalFile} {
		path := filepath.Join(dir, name)
		st, err := os.Stat(path)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		if err := checkPrivate(path, st); err != nil {
			return err
		}
	}
	return nil
}

// readPrivate checks dir (CheckPrivate) and returns the plan's bytes, checked again on the
// open file itself, so that a file swapped between the check and the read is not read.
func readPrivate(dir string) ([]byte, error) {
	if _, err := os.Stat(dir); err != nil {
		return nil, err // a missing folder is a missing plan
	}
	if err := CheckPrivate(dir); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, File)
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a plan etcdmedic wrote (not a regular file)", path)
	}
	if err := checkPrivate(path, st); err != nil {
		return nil, err
	}
	return io.ReadAll(f)
}

// checkPrivate refuses a file or folder another user owns or its group or others can write.
func checkPrivate(path string, st fs.FileInfo) error {
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return &NotPrivateError{Path: path, Why: "has no owner etcdmedic can read", Fix: "move the plan to a local file system"}
	}
	me := os.Geteuid()
	if int(sys.Uid) != me {
		return &NotPrivateError{Path: path, Why: fmt.Sprintf("is owned by uid %d, not by uid %d running etcdmedic", sys.Uid, me),
			Fix: fmt.Sprintf("chown %d %s", me, path)}
	}
	if perm := st.Mode().Perm(); perm&0o022 != 0 {
		return &NotPrivateError{Path: path, Why: fmt.Sprintf("is writable by its group or by others (mode %04o)", perm),
			Fix: "chmod go-w " + path}
	}
	return nil
}
