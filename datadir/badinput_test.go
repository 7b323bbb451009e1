package datadir_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	. "github.com/etcdmedic/etcdmedic/datadir"
	"github.com/etcdmedic/etcdmedic/finding"
)

// Bad input gets a clear error or a report that names the damage, never a panic.

func TestInspectRefusesWhatIsNotADataDir(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	file := filepath.Join(tmp, "file")
	os.WriteFile(file, []byte("hello"), 0o644)
	random := filepath.Join(tmp, "random")
	os.MkdirAll(filepath.Join(random, "sub"), 0o755)
	os.WriteFile(filepath.Join(random, "notes.txt"), []byte("not etcd"), 0o644)
	garbageWAL := filepath.Join(tmp, "garbage", "member", "wal")
	os.MkdirAll(garbageWAL, 0o755)
	os.WriteFile(filepath.Join(garbageWAL, "0000000000000000-0000000000000000.wal"), []byte("\x10\x00\x00\x00\x00\x00\x00\x00garbage!garbage!"), 0o644)
	empty := filepath.Join(tmp, "empty")
	os.MkdirAll(empty, 0o755)

	for _, tc := range []struct {
		name, path string
		wantErr    string
		wantKind   string
	}{
		{"missing path", filepath.Join(tmp, "nope"), "does not exist", ""},
		{"a file", file, "is a file", ""},
		{"empty dir", empty, "", KindEmpty},
		{"random files", random, "", KindNotEtcd},
		{"garbage WAL", filepath.Join(tmp, "garbage"), "read WAL", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Inspect(tc.path, Options{})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !errors.Is(err, ErrNotInspectable) {
					t.Fatalf("want error containing %q, got %v", tc.wantErr, err)
				}
				if strings.Contains(err.Error(), "\n") {
					t.Errorf("error is not one line: %q", err)
				}
				return
			}
			if err != nil || r.Kind != tc.wantKind {
				t.Fatalf("want kind %s, got %+v, %v", tc.wantKind, r, err)
			}
		})
	}
}

func TestInspectPermissionDenied(t *testing.T) {
	t.Parallel()
	if os.Geteuid() == 0 {
		t.Skip("root reads every file: permission denied cannot happen")
	}
	dir := filepath.Join(t.TempDir(), "locked")
	os.MkdirAll(dir, 0o000)
	_, err := Inspect(dir, Options{})
	if err == nil || !strings.Contains(err.Error(), "permission denied") {
		t.Fatalf("want permission denied, got %v", err)
	}
}

func lastSegment(t *testing.T, dataDir string) (string, uint64) {
	t.Helper()
	seg, lastIndex, err := LastWALSegment(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	return seg, lastIndex
}

func endOfRecords(t *testing.T, path string) (last, end int64) {
	t.Helper()
	last, end, err := WALRecordBounds(path)
	if err != nil {
		t.Fatal(err)
	}
	return last, end
}

func TestInspectDamagedWAL(t *testing.T) {
	t.Parallel()
	t.Run("cut inside the last record", func(t *testing.T) {
		dir := stoppedMember(t)
		seg, lastIndex := lastSegment(t, dir)
		_, end := endOfRecords(t, seg)
		if err := os.Truncate(seg, end-5); err != nil {
			t.Fatal(err)
		}
		r, err := Inspect(dir, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if r.Raft.Tail == nil || r.Raft.Tail.Kind != "truncated" || r.Raft.LastIndex > lastIndex {
			t.Fatalf("want a truncated tail, got %+v (last index %d, was %d)", r.Raft.Tail, r.Raft.LastIndex, lastIndex)
		}
		wantFinding(t, r, "wal-torn-tail")
	})
	t.Run("last record's sector zeroed", func(t *testing.T) {
		dir := stoppedMember(t)
		seg, _ := lastSegment(t, dir)
		last, end := endOfRecords(t, seg)
		f, _ := os.OpenFile(seg, os.O_RDWR, 0)
		zeros := make([]byte, end-last-8)
		f.WriteAt(zeros, last+8)
		f.Close()
		r, err := Inspect(dir, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if r.Raft.Tail == nil || r.Raft.Tail.Kind != "torn-write" {
			t.Fatalf("want a torn write, got %+v", r.Raft.Tail)
		}
		wantFinding(t, r, "wal-torn-tail")
	})
	t.Run("bytes flipped inside a record", func(t *testing.T) {
		dir := stoppedMember(t)
		seg, _ := lastSegment(t, dir)
		last, end := endOfRecords(t, seg)
		// Inside the last record's body (past its 8-byte frame header): its CRC no longer
		// matches, and no sector of it is zero, so it is damage, not a torn write.
		f, _ := os.OpenFile(seg, os.O_RDWR, 0)
		off := last + 8 + (end-last-8)/2
		b := make([]byte, 2)
		f.ReadAt(b, off)
		b[0], b[1] = b[0]^0xff, b[1]^0xff
		f.WriteAt(b, off)
		f.Close()
		r, err := Inspect(dir, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if r.Raft.Tail == nil || (r.Raft.Tail.Kind != "crc-mismatch" && r.Raft.Tail.Kind != "undecodable") {
			t.Fatalf("want a CRC mismatch or an undecodable record, got %+v", r.Raft.Tail)
		}
		wantFinding(t, r, "wal-corrupt")
	})
}

func TestInspectDamagedDB(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		damage func(path string) error
		want   string
	}{
		{"truncated", func(p string) error { return os.Truncate(p, 8192) }, "truncated"},
		{"zeroed", func(p string) error {
			st, _ := os.Stat(p)
			return os.WriteFile(p, make([]byte, st.Size()), 0o600)
		}, "neither bbolt meta page is valid"},
		{"empty", func(p string) error { return os.Truncate(p, 0) }, "empty"},
		{"missing", os.Remove, "no such file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := stoppedMember(t)
			db := filepath.Join(dir, "member", "snap", "db")
			if err := tc.damage(db); err != nil {
				t.Fatal(err)
			}
			r, err := Inspect(dir, Options{Deep: true})
			if err != nil {
				t.Fatal(err)
			}
			if r.Backend != nil || !strings.Contains(r.BackendError, tc.want) {
				t.Fatalf("want backend error containing %q, got %q", tc.want, r.BackendError)
			}
			if r.Identity.MemberID == 0 || r.Raft.LastIndex == 0 {
				t.Errorf("the WAL part of the report should still stand: %+v %+v", r.Identity, r.Raft)
			}
			wantFinding(t, r, "backend-unreadable")
		})
	}
}

func wantFinding(t *testing.T, r *Report, id string) {
	t.Helper()
	for _, f := range finding.ForDataDir(r) {
		if f.ID == id {
			if f.Evidence == nil || f.Remedy == "" || f.Why == "" {
				t.Errorf("finding %s lacks evidence, why or remedy: %+v", id, f)
			}
			return
		}
	}
	t.Errorf("want finding %s, got %+v", id, finding.ForDataDir(r))
}

// A running member's files are locked: the error names the file that is, the WAL segment or
// the db (a locked WAL was reported as "the db file is locked", review item 13).
func TestInspectNamesTheLockedFile(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		lock func(t *testing.T, dir string) string // locks a file, returns what the error must say
	}{
		{"the newest WAL segment (an OFD lock, as etcd takes)", func(t *testing.T, dir string) string {
			seg, _, err := LastWALSegment(dir)
			if err != nil {
				t.Fatal(err)
			}
			f := openForLock(t, seg)
			lk := unix.Flock_t{Type: unix.F_WRLCK}
			if err := unix.FcntlFlock(f.Fd(), unix.F_OFD_SETLK, &lk); err != nil {
				t.Fatal(err)
			}
			return "the WAL segment " + seg + " is locked by a running process"
		}},
		{"the db (a flock, as bbolt takes)", func(t *testing.T, dir string) string {
			db := filepath.Join(dir, "member", "snap", "db")
			f := openForLock(t, db)
			if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
				t.Fatal(err)
			}
			return "the db file " + db + " is locked by a running process"
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := stoppedMember(t)
			want := tc.lock(t, dir)
			_, err := Inspect(dir, Options{})
			if !errors.Is(err, ErrLocked) || !errors.Is(err, ErrNotInspectable) || !strings.Contains(err.Error(), want) {
				t.Fatalf("want an error containing %q, got %v", want, err)
			}
		})
	}
}

// openForLock opens path for a lock the test holds until it ends.
func openForLock(t *testing.T, path string) *os.File {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// The WAL dir as etcd lists it (checkWALNames): a .wal file with an odd name is ignored and
// listed, a symlinked segment is read through its link, and only a real gap in the sequence is
// damage, named by the missing sequence. Each of these made the whole WAL invisible, and a
// healthy member read as data-without-wal (review item 12).
func TestInspectListsTheWALAsEtcdDoes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		change func(t *testing.T, walDir, seg string)
		// ignored: the names listed as ignored; corrupt: the wal-corrupt detail, "" for none.
		ignored []string
		corrupt string
	}{
		{"a backup.wal beside the segment", func(t *testing.T, walDir, seg string) {
			writeTestFile(t, filepath.Join(walDir, "backup.wal"), "a copy someone made")
		}, []string{"backup.wal"}, ""},
		{"a name with the wrong shape", func(t *testing.T, walDir, seg string) {
			writeTestFile(t, filepath.Join(walDir, "0-x.wal"), "")
		}, []string{"0-x.wal"}, ""},
		{"the segment symlinked from another disk", func(t *testing.T, walDir, seg string) {
			moved := filepath.Join(t.TempDir(), filepath.Base(seg))
			if err := os.Rename(seg, moved); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(moved, seg); err != nil {
				t.Fatal(err)
			}
		}, nil, ""},
		{"segment 1 missing between 0 and 2", func(t *testing.T, walDir, seg string) {
			copyTestFile(t, seg, filepath.Join(walDir, "0000000000000002-0000000000000000.wal"))
		}, nil, "WAL segment sequence 0000000000000001 is missing between 0000000000000000-0000000000000000.wal and 0000000000000002-0000000000000000.wal"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := stoppedMember(t)
			seg, lastIndex, err := LastWALSegment(dir)
			if err != nil {
				t.Fatal(err)
			}
			tc.change(t, filepath.Dir(seg), seg)
			r, err := Inspect(dir, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if r.Kind != KindEtcdMember || r.Raft == nil || r.Raft.LastIndex != lastIndex || r.Backend == nil {
				t.Fatalf("want a member read to index %d, got kind %s (%s), raft %+v", lastIndex, r.Kind, r.KindReason, r.Raft)
			}
			if strings.Join(r.Raft.IgnoredWALFiles, ",") != strings.Join(tc.ignored, ",") {
				t.Errorf("ignored %v, want %v", r.Raft.IgnoredWALFiles, tc.ignored)
			}
			if tc.ignored != nil {
				wantFinding(t, r, finding.IDWALFilesIgnored)
			}
			fs := finding.ForDataDir(r)
			if tc.corrupt == "" {
				if w := finding.Worst(fs); w == finding.Critical || w == finding.Warning {
					t.Errorf("a healthy member: want no warning, got %+v", fs)
				}
				return
			}
			if r.Raft.Tail == nil || r.Raft.Tail.Kind != "missing-segment" || !strings.Contains(r.Raft.Tail.Detail, tc.corrupt) {
				t.Fatalf("want a missing-segment problem containing %q, got %+v", tc.corrupt, r.Raft.Tail)
			}
			wantFinding(t, r, finding.IDWALCorrupt)
		})
	}
}

func writeTestFile(t *testing.T, path, contents string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(contents), 0o600); err != nil {
		t.Fatal(err)
	}
}

func copyTestFile(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	writeTestFile(t, dst, string(b))
}
