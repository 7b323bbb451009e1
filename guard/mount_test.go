package guard

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/etcdmedic/etcdmedic/datadir"
)

// bindMount mounts src on dst (a bind mount: the same filesystem, another mount), unmounted when
// the test ends. Only root may mount: the test is skipped otherwise.
func bindMount(t *testing.T, src, dst string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("bind mounts need root: run the guard tests as root to cover data dirs and WAL dirs that are mount points")
	}
	if err := os.MkdirAll(dst, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount(src, dst, "", unix.MS_BIND, ""); err != nil {
		t.Skipf("mount --bind %s %s: %v (a container without CAP_SYS_ADMIN?)", src, dst, err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dst, unix.MNT_DETACH); err != nil {
			t.Errorf("umount %s: %v", dst, err)
		}
	})
}

// The review's layout: /store/m3 bind-mounted on /var/etcd, one filesystem (same st_dev), two
// mounts: a rename from /var/etcd to beside it fails (EXDEV). The quarantine goes inside the
// data dir, on its mount, and says plainly that it lives on that volume.
func TestQuarantineOfABindMountedDataDir(t *testing.T) {
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	store, dataDir := filepath.Join(root, "store", "m3"), filepath.Join(root, "var", "etcd")
	writeFiles(t, store, map[string]string{"member/snap/db": "bbolt", "member/wal/" + seg0: "wal0", "member/wal/" + seg1: "wal1"})
	bindMount(t, store, dataDir)
	before := byPath(t, dataDir)

	q, err := QuarantineFor(dataDir, nil, staleWhy, now)
	if err != nil {
		t.Fatalf("quarantine of a bind-mounted data dir: %v", err)
	}
	if want := filepath.Join(dataDir, datadir.QuarantineFolder); filepath.Dir(q.Dir) != want {
		t.Errorf("quarantined in %s, want inside the data dir's own mount (%s)", q.Dir, want)
	}
	if !strings.Contains(q.Note, "on its own volume") || !strings.Contains(q.Note, "kubeadm reset") {
		t.Errorf("the result does not say the quarantine goes with the volume: %q", q.Note)
	}
	if err := Verify(q.Dir); err != nil {
		t.Fatal(err)
	}
	after := byPath(t, filepath.Join(q.Dir, "data"))
	for path, sum := range before {
		if after[path] != sum {
			t.Errorf("%s: %q before, %q in quarantine", path, sum, after[path])
		}
	}
	if partial, err := Unfinished(dataDir); err != nil || partial != "" {
		t.Errorf("an unfinished quarantine is left: %q, %v", partial, err)
	}
}

// A WAL dir that is a mount point of its own: its quarantine can go neither beside it (another
// mount) nor inside it (etcd's wal.Create removes everything in the WAL dir). Refused before
// anything moves, saying how to move it by hand; no quarantine folder is left anywhere.
func TestQuarantineRefusesAWALDirAtAMountPoint(t *testing.T) {
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	dataDir, walDisk, walDir := filepath.Join(root, "data"), filepath.Join(root, "disks", "wal"), filepath.Join(root, "wal")
	writeFiles(t, dataDir, map[string]string{"member/snap/db": "bbolt"})
	writeFiles(t, walDisk, map[string]string{seg0: "wal0", seg1: "wal1"})
	bindMount(t, walDisk, walDir)
	before, beforeWAL := listTree(t, dataDir), listTree(t, walDir)
	report := &datadir.Report{Path: dataDir, Kind: datadir.KindEtcdMember, MemberDir: filepath.Join(dataDir, "member"), WALDir: walDir}

	_, err = QuarantineFor(dataDir, report, staleWhy, now)
	if err == nil || !strings.Contains(err.Error(), "is a mount point") || !strings.Contains(err.Error(), "Move its files by hand") || !strings.Contains(err.Error(), "nothing was moved") {
		t.Fatalf("error %v: want a refusal saying how to move the WAL by hand", err)
	}
	if after := listTree(t, dataDir); !equalLists(after, before) {
		t.Errorf("the data dir held %v, now %v", before, after)
	}
	if after := listTree(t, walDir); !equalLists(after, beforeWAL) {
		t.Errorf("the WAL dir held %v, now %v", beforeWAL, after)
	}
	for _, q := range []string{dataDir + datadir.QuarantineFolder, walDir + datadir.QuarantineFolder, filepath.Join(walDir, datadir.QuarantineFolder)} {
		if _, err := os.Stat(q); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("a quarantine folder %s was made (%v)", q, err)
		}
	}
}

func equalLists(a, b []string) bool { return strings.Join(a, "\n") == strings.Join(b, "\n") }

// On a kernel without statx (before 4.11: RHEL 7's) or under a seccomp profile that refuses it,
// mounts are told apart by their device, as before mount IDs were asked, and a quarantine
// still goes through.
func TestQuarantineWithoutStatx(t *testing.T) {
	for _, refusal := range []error{unix.ENOSYS, unix.EPERM} {
		t.Run(refusal.Error(), func(t *testing.T) {
			orig := statx
			statx = func(int, string, int, int, *unix.Statx_t) error { return refusal }
			t.Cleanup(func() { statx = orig })
			dataDir := filepath.Join(t.TempDir(), "etcd")
			writeFiles(t, dataDir, map[string]string{"member/snap/db": "db", seg0: "wal0"})
			before := byPath(t, dataDir)
			q, err := Quarantine(dataDir, &datadir.Report{Path: dataDir}, stale, now)
			if err != nil {
				t.Fatalf("quarantine without statx: %v", err)
			}
			if kept := byPath(t, filepath.Join(q.Dir, "data")); len(kept) != len(before) {
				t.Fatalf("the quarantine holds %v: want %v", kept, before)
			}
		})
	}
	if _, err := mountOf(filepath.Join(t.TempDir(), "missing")); err == nil || !strings.Contains(err.Error(), "statx") {
		t.Errorf("a missing path: %v", err)
	}
}
