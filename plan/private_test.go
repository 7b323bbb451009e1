package plan

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// nobody is the uid of a second user: a plan it owns must not be run by anyone else.
const nobody = 65534

// A plan is trusted input to commands that stop, start and move data: Load refuses a plan
// folder, plan or journal that another user owns or that group or others can write, and Save
// refuses to write into such a folder. Each row is one way an audit found a plan exposed.
func TestPlanRefusedUnlessPrivate(t *testing.T) {
	type p struct{ Survivor string }
	for _, tc := range []struct {
		name   string
		root   bool // needs root, to give the file to another user
		expose func(t *testing.T, dir string) error
	}{
		{"folder writable by all", false, func(t *testing.T, dir string) error { return os.Chmod(dir, 0o777) }},
		{"folder writable by its group", false, func(t *testing.T, dir string) error { return os.Chmod(dir, 0o770) }},
		{"plan writable by all", false, func(t *testing.T, dir string) error { return os.Chmod(filepath.Join(dir, File), 0o666) }},
		{"plan writable by its group", false, func(t *testing.T, dir string) error { return os.Chmod(filepath.Join(dir, File), 0o620) }},
		{"journal writable by all", false, func(t *testing.T, dir string) error {
			return os.WriteFile(filepath.Join(dir, JournalFile), nil, 0o666) // created 0666 under any umask below
		}},
		{"plan owned by another user", true, func(t *testing.T, dir string) error { return os.Chown(filepath.Join(dir, File), nobody, nobody) }},
		{"folder owned by another user", true, func(t *testing.T, dir string) error { return os.Chown(dir, nobody, nobody) }},
		{"journal owned by another user", true, func(t *testing.T, dir string) error {
			if err := os.WriteFile(filepath.Join(dir, JournalFile), nil, 0o600); err != nil {
				return err
			}
			return os.Chown(filepath.Join(dir, JournalFile), nobody, nobody)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.root && os.Geteuid() != 0 {
				t.Skip("giving a file to another user needs root")
			}
			dir := filepath.Join(t.TempDir(), "plan")
			if err := Save(dir, p{"m1"}); err != nil {
				t.Fatal(err)
			}
			old := syscall.Umask(0)
			err := tc.expose(t, dir)
			syscall.Umask(old)
			if err != nil {
				t.Fatal(err)
			}
			var got p
			err = Load(dir, &got)
			if !errors.Is(err, ErrNotPrivate) || got.Survivor != "" {
				t.Fatalf("Load: want ErrNotPrivate and nothing read, got %v, %+v", err, got)
			}
			var np *NotPrivateError
			if !errors.As(err, &np) || np.Fix == "" {
				t.Fatalf("the error must name the path and the fix: %#v", err)
			}
		})
	}
}

// Save writes a private plan whatever the umask, refuses an existing folder others can write
// (writing nothing into it), and a plan saved so loads.
func TestPlanSavedPrivateUnderUmask022(t *testing.T) {
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	dir := filepath.Join(t.TempDir(), "plan")
	if err := Save(dir, map[string]string{"survivor": "m1"}); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]os.FileMode{dir: 0o700, filepath.Join(dir, File): 0o600} {
		if st, err := os.Stat(path); err != nil || st.Mode().Perm() != want {
			t.Fatalf("%s: %v, mode %v, want %04o", path, err, st.Mode().Perm(), want)
		}
	}
	var got map[string]string
	if err := Load(dir, &got); err != nil || got["survivor"] != "m1" {
		t.Fatalf("%v %v", err, got)
	}

	shared := filepath.Join(t.TempDir(), "shared")
	if err := os.Mkdir(shared, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(shared, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := Save(shared, got); !errors.Is(err, ErrNotPrivate) {
		t.Fatalf("Save into a folder writable by all: %v", err)
	}
	if ents, _ := os.ReadDir(shared); len(ents) != 0 {
		t.Fatalf("a refused Save wrote %v", ents)
	}
	if err := CheckPrivate(filepath.Join(t.TempDir(), "not-yet")); err != nil {
		t.Fatalf("a folder Save will create is fine: %v", err)
	}
	if err := Load(filepath.Join(t.TempDir(), "none"), &got); !IsMissing(err) {
		t.Fatalf("a missing plan folder is a missing plan: %v", err)
	}
}
