package guard

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/etcdmedic/etcdmedic/backup"
	"github.com/etcdmedic/etcdmedic/datadir"
)

const (
	seg0 = "0000000000000000-0000000000000000.wal"
	seg1 = "0000000000000001-0000000000000010.wal"
)

var (
	stale    = Verdict{Class: Foreign, Movable: true, Reason: "another cluster's data"}
	staleWhy = Reason{Class: Foreign, Why: "another cluster's data"}
	now      = time.Date(2026, 12, 1, 3, 0, 0, 0, time.UTC)
)

func writeFiles(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for path, body := range files {
		p := filepath.Join(root, path)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

func symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(link), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

// linkedMember lays out the field's data dir: /var/lib/etcd -> /mnt/disk1/etcd, with
// member/wal -> /mnt/wal/member/wal on a disk of its own. It returns the data dir as given,
// the real one, and the WAL folder.
func linkedMember(t *testing.T) (given, real, wal string) {
	tmp, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	real, wal = filepath.Join(tmp, "mnt/disk1/etcd"), filepath.Join(tmp, "mnt/wal/member/wal")
	writeFiles(t, real, map[string]string{"member/snap/db": "bbolt", "member/snap/0000000000000002-0000000000000010.snap": "snap"})
	writeFiles(t, wal, map[string]string{seg0: "wal0", seg1: "wal1"})
	symlink(t, wal, filepath.Join(real, "member/wal"))
	given = filepath.Join(tmp, "var/lib/etcd")
	symlink(t, real, given)
	return given, real, wal
}

func readManifest(t *testing.T, dir string) Manifest {
	t.Helper()
	var m Manifest
	if err := backup.ReadJSON(filepath.Join(dir, "manifest.json"), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// byPath is what a tree holds: each file's checksum by its path.
func byPath(t *testing.T, root string) map[string]string {
	t.Helper()
	sums, _, err := backup.Checksum(root, datadir.Ignorable)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, f := range sums {
		out[f.Path] = f.SHA256
	}
	return out
}

func TestQuarantineOfALinkedDataDirKeepsEveryFile(t *testing.T) {
	cases := []struct {
		name string
		run  func(t *testing.T, given string) (*Quarantined, error)
	}{
		{"summed here", func(t *testing.T, given string) (*Quarantined, error) {
			return Quarantine(given, &datadir.Report{Path: given}, stale, now)
		}},
		{"sums from a verified backup (recover)", func(t *testing.T, given string) (*Quarantined, error) {
			from := filepath.Join(t.TempDir(), "backup")
			known, _, err := backup.CopyTreeSummed(given, filepath.Join(from, "data"), datadir.Ignorable, 2)
			if err != nil {
				t.Fatal(err)
			}
			if err := backup.RequireMemberFiles(known); err != nil {
				t.Fatal(err)
			}
			return QuarantineKnown(given, &datadir.Report{Path: given}, staleWhy, now, known, from)
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			given, real, wal := linkedMember(t)
			// A loop inside the data dir must neither hang the walk nor stop the move.
			symlink(t, "..", filepath.Join(real, "member/loop"))
			before := byPath(t, given)
			if len(before) != 4 {
				t.Fatalf("the layout holds %d files: %v", len(before), before)
			}
			q, err := c.run(t, given)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(q.Dir, real+datadir.QuarantineFolder+"/") {
				t.Errorf("quarantined into %s, want beside the real data dir %s", q.Dir, real)
			}
			if err := Verify(q.Dir); err != nil {
				t.Fatal(err)
			}
			if after := byPath(t, filepath.Join(q.Dir, "data")); !equalMaps(after, before) {
				t.Errorf("the quarantine holds %v, the data dir held %v", after, before)
			}
			m := readManifest(t, q.Dir)
			if m.Class != Foreign || m.Reason != "another cluster's data" {
				t.Errorf("manifest says %s: %q, want why the data was moved aside", m.Class, m.Reason)
			}
			if m.Source != given || m.RealSource != real {
				t.Errorf("manifest source %q real %q, want %q and %q", m.Source, m.RealSource, given, real)
			}
			wantLinks := []backup.Link{{Path: "member/loop", Target: ".."}, {Path: "member/wal", Target: wal}}
			if !slices.Equal(m.Links, wantLinks) {
				t.Errorf("manifest links %+v, want %+v", m.Links, wantLinks)
			}
			if q.Files != 4 || len(m.Files) != 4 {
				t.Errorf("quarantined %d files, manifest %d, want 4", q.Files, len(m.Files))
			}
			for name, body := range map[string]string{seg0: "wal0", seg1: "wal1"} {
				if b, err := os.ReadFile(filepath.Join(wal, name)); err != nil || string(b) != body {
					t.Errorf("WAL segment %s on its disk: %q, %v", name, b, err)
				}
			}
			if ents, err := os.ReadDir(real); err != nil || len(ents) != 0 {
				t.Errorf("the data dir still holds %v (%v)", ents, err)
			}
			if to, err := filepath.EvalSymlinks(given); err != nil || to != real {
				t.Errorf("the data dir link now leads to %q (%v)", to, err)
			}
		})
	}
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func TestQuarantineRefusesWhatWouldDangleBeforeMoving(t *testing.T) {
	cases := []struct {
		name   string
		layout func(t *testing.T, tmp, dataDir string)
		want   []string
		is     error
	}{{
		name: "member/wal a relative link out of the data dir",
		layout: func(t *testing.T, tmp, dataDir string) {
			writeFiles(t, filepath.Join(tmp, "wal-disk"), map[string]string{seg0: "wal0"})
			symlink(t, "../../wal-disk", filepath.Join(dataDir, "member/wal"))
		},
		want: []string{"member/wal is a relative link (../../wal-disk) that would dangle once moved", "nothing was moved"},
	}, {
		name: "member a relative link out of the data dir",
		layout: func(t *testing.T, tmp, dataDir string) {
			if err := os.Rename(filepath.Join(dataDir, "member"), filepath.Join(tmp, "member-disk")); err != nil {
				t.Fatal(err)
			}
			writeFiles(t, filepath.Join(tmp, "member-disk"), map[string]string{"wal/" + seg0: "wal0"})
			symlink(t, "../member-disk", filepath.Join(dataDir, "member"))
		},
		want: []string{"member is a relative link (../member-disk)", "nothing was moved"},
	}, {
		name: "member/wal an absolute link into the data dir itself",
		layout: func(t *testing.T, tmp, dataDir string) {
			writeFiles(t, filepath.Join(dataDir, "wal-here"), map[string]string{seg0: "wal0"})
			symlink(t, filepath.Join(dataDir, "wal-here"), filepath.Join(dataDir, "member/wal"))
		},
		want: []string{"member/wal is an absolute link", "into the data dir itself", "nothing was moved"},
	}, {
		name: "member/wal dangles (its disk not mounted)",
		layout: func(t *testing.T, tmp, dataDir string) {
			symlink(t, filepath.Join(tmp, "mnt/wal/member/wal"), filepath.Join(dataDir, "member/wal"))
		},
		want: []string{"member/wal is a link to", "does not exist", "nothing was moved"},
		is:   backup.ErrDanglingLink,
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tmp, err := filepath.EvalSymlinks(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			dataDir := filepath.Join(tmp, "etcd")
			writeFiles(t, dataDir, map[string]string{"member/snap/db": "bbolt"})
			c.layout(t, tmp, dataDir)
			before := listTree(t, dataDir)
			_, err = Quarantine(dataDir, &datadir.Report{Path: dataDir}, stale, now)
			if err == nil {
				t.Fatal("quarantined")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if c.is != nil && !errors.Is(err, c.is) {
				t.Errorf("error %v is not %v", err, c.is)
			}
			if after := listTree(t, dataDir); !slices.Equal(after, before) {
				t.Errorf("the data dir held %v, now %v", before, after)
			}
			if _, err := os.Lstat(dataDir + datadir.QuarantineFolder); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("a refused quarantine left its folder behind: %v", err)
			}
		})
	}
}

// listTree lists what a tree holds without following links.
func listTree(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		out = append(out, rel+" "+d.Type().String())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// A crash after the first rename: running the quarantine again finishes it, whether the
// manifest records the real data dir or, written by an earlier version, only the one given.
func TestQuarantineOfALinkedDataDirResumes(t *testing.T) {
	for _, name := range []string{"manifest with the real source", "manifest of an earlier version"} {
		t.Run(name, func(t *testing.T) {
			given, real, wal := linkedMember(t)
			writeFiles(t, real, map[string]string{"notes.txt": "kept"})
			before := byPath(t, given)
			sums, total, err := backup.Checksum(given, datadir.Ignorable)
			if err != nil {
				t.Fatal(err)
			}
			m := Manifest{Source: given, RealSource: real, CreatedAt: now, Class: Foreign, Entries: []string{"member", "notes.txt"}, Files: sums, Bytes: total}
			if name == "manifest of an earlier version" {
				m.RealSource = ""
			}
			partial := filepath.Join(real+datadir.QuarantineFolder, "20261201T030000Z-foreign"+partialSuffix)
			if err := os.MkdirAll(filepath.Join(partial, "data"), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := backup.WriteJSONAtomic(filepath.Join(partial, "manifest.json"), m); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(filepath.Join(real, "member"), filepath.Join(partial, "data/member")); err != nil {
				t.Fatal(err)
			}
			q, err := Quarantine(given, &datadir.Report{Path: given}, stale, now.Add(time.Hour))
			if err != nil {
				t.Fatal(err)
			}
			if q.Dir != strings.TrimSuffix(partial, partialSuffix) {
				t.Errorf("finished %s, want the interrupted %s", q.Dir, partial)
			}
			if err := Verify(q.Dir); err != nil {
				t.Fatal(err)
			}
			if after := byPath(t, filepath.Join(q.Dir, "data")); !equalMaps(after, before) {
				t.Errorf("the quarantine holds %v, the data dir held %v", after, before)
			}
			if b, err := os.ReadFile(filepath.Join(wal, seg1)); err != nil || string(b) != "wal1" {
				t.Errorf("WAL segment on its disk: %q, %v", b, err)
			}
		})
	}
}

func TestQuarantineOfAnotherDataDirsPartialIsRefused(t *testing.T) {
	given, real, _ := linkedMember(t)
	partial := filepath.Join(real+datadir.QuarantineFolder, "20261201T030000Z-foreign"+partialSuffix)
	if err := os.MkdirAll(partial, 0o700); err != nil {
		t.Fatal(err)
	}
	other := Manifest{Source: "/elsewhere", RealSource: "/elsewhere", Entries: []string{"member"}}
	if err := backup.WriteJSONAtomic(filepath.Join(partial, "manifest.json"), other); err != nil {
		t.Fatal(err)
	}
	before := listTree(t, real)
	if _, err := Quarantine(given, &datadir.Report{Path: given}, stale, now); err == nil || !strings.Contains(err.Error(), "is of /elsewhere") {
		t.Fatalf("resumed another data dir's quarantine: %v", err)
	}
	if after := listTree(t, real); !slices.Equal(after, before) {
		t.Errorf("the data dir held %v, now %v", before, after)
	}
}

// Only a reason that says why, for data that may move, moves anything: a verdict that keeps the
// data where it is (a live member's, a wrong --data-dir's files) and a reason whose class keeps
// it are refused before a quarantine folder is made.
func TestQuarantineRefusesWhatStays(t *testing.T) {
	type refused func(dataDir string) (*Quarantined, error)
	cases := map[string]refused{
		"a verdict that must not move": func(dataDir string) (*Quarantined, error) {
			return Quarantine(dataDir, &datadir.Report{Path: dataDir}, Verdict{Class: Mismatched, Reason: "a live member's data"}, now)
		},
		"a reason without a why": func(dataDir string) (*Quarantined, error) {
			return QuarantineFor(dataDir, &datadir.Report{Path: dataDir}, Reason{Class: Removed, Why: " "}, now)
		},
	}
	for _, class := range []Class{Empty, Valid, Unknown, Unreadable, Mismatched, Incomplete, ""} {
		cases["a reason of class "+string(class)] = func(dataDir string) (*Quarantined, error) {
			return QuarantineKnown(dataDir, &datadir.Report{Path: dataDir}, Reason{Class: class, Why: "because"}, now, nil, "")
		}
	}
	for name, run := range cases {
		t.Run(name, func(t *testing.T) {
			dataDir := filepath.Join(t.TempDir(), "etcd")
			writeFiles(t, dataDir, map[string]string{"member/snap/db": "bbolt", "member/wal/" + seg0: "wal0"})
			before := listTree(t, dataDir)
			if q, err := run(dataDir); err == nil {
				t.Fatalf("quarantined into %s", q.Dir)
			}
			if after := listTree(t, dataDir); !slices.Equal(after, before) {
				t.Errorf("the data dir held %v, now %v", before, after)
			}
			if _, err := os.Lstat(dataDir + datadir.QuarantineFolder); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("a refused quarantine left its folder behind: %v", err)
			}
		})
	}
}
