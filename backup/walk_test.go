package backup

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

const (
	seg0 = "0000000000000000-0000000000000000.wal"
	seg1 = "0000000000000001-0000000000000010.wal"
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

func paths(files []FileSum) []string {
	var out []string
	for _, f := range files {
		out = append(out, f.Path)
	}
	return out
}

// A member's files, laid out the ways operators lay them out: each case returns the data dir
// to back up and the links it should find.
func TestLinkedDataDirsAreWalkedWhole(t *testing.T) {
	member := []string{"member/snap/db", "member/wal/" + seg0, "member/wal/" + seg1}
	cases := []struct {
		name     string
		layout   func(t *testing.T, tmp string) (dataDir string, links []Link)
		files    []string
		dangling string // the link a dangling error must name
	}{{
		name: "plain data dir",
		layout: func(t *testing.T, tmp string) (string, []Link) {
			writeFiles(t, filepath.Join(tmp, "etcd"), map[string]string{"member/snap/db": "bbolt", "member/wal/" + seg0: "wal0", "member/wal/" + seg1: "wal1"})
			return filepath.Join(tmp, "etcd"), nil
		},
		files: member,
	}, {
		name: "data dir is a link (/var/lib/etcd -> /mnt/disk1/etcd)",
		layout: func(t *testing.T, tmp string) (string, []Link) {
			writeFiles(t, filepath.Join(tmp, "disk1/etcd"), map[string]string{"member/snap/db": "bbolt", "member/wal/" + seg0: "wal0", "member/wal/" + seg1: "wal1"})
			symlink(t, filepath.Join(tmp, "disk1/etcd"), filepath.Join(tmp, "var/lib/etcd"))
			return filepath.Join(tmp, "var/lib/etcd"), nil
		},
		files: member,
	}, {
		name: "member/wal on its own disk (absolute link)",
		layout: func(t *testing.T, tmp string) (string, []Link) {
			writeFiles(t, filepath.Join(tmp, "etcd"), map[string]string{"member/snap/db": "bbolt"})
			writeFiles(t, filepath.Join(tmp, "waldisk/member/wal"), map[string]string{seg0: "wal0", seg1: "wal1"})
			symlink(t, filepath.Join(tmp, "waldisk/member/wal"), filepath.Join(tmp, "etcd/member/wal"))
			return filepath.Join(tmp, "etcd"), []Link{{"member/wal", filepath.Join(tmp, "waldisk/member/wal")}}
		},
		files: member,
	}, {
		name: "member/snap a relative link, the db a link to a file",
		layout: func(t *testing.T, tmp string) (string, []Link) {
			writeFiles(t, filepath.Join(tmp, "etcd"), map[string]string{"member/wal/" + seg0: "wal0", "member/wal/" + seg1: "wal1", "snapdisk/real.db": "bbolt"})
			symlink(t, "../snapdisk", filepath.Join(tmp, "etcd/member/snap"))
			symlink(t, "real.db", filepath.Join(tmp, "etcd/snapdisk/db"))
			return filepath.Join(tmp, "etcd"), []Link{{"member/snap", "../snapdisk"}, {"member/snap/db", "real.db"}, {"snapdisk/db", "real.db"}}
		},
		files: []string{"member/snap/db", "member/snap/real.db", "member/wal/" + seg0, "member/wal/" + seg1, "snapdisk/db", "snapdisk/real.db"},
	}, {
		name: "a loop (member/loop -> ..) and a link to / are not walked again",
		layout: func(t *testing.T, tmp string) (string, []Link) {
			writeFiles(t, filepath.Join(tmp, "etcd"), map[string]string{"member/snap/db": "bbolt", "member/wal/" + seg0: "wal0", "member/wal/" + seg1: "wal1"})
			symlink(t, "..", filepath.Join(tmp, "etcd/member/loop"))
			symlink(t, "/", filepath.Join(tmp, "etcd/member/root"))
			return filepath.Join(tmp, "etcd"), []Link{{"member/loop", ".."}, {"member/root", "/"}}
		},
		files: member,
	}, {
		name: "member/wal dangles (its disk not mounted)",
		layout: func(t *testing.T, tmp string) (string, []Link) {
			writeFiles(t, filepath.Join(tmp, "etcd"), map[string]string{"member/snap/db": "bbolt"})
			symlink(t, filepath.Join(tmp, "waldisk/member/wal"), filepath.Join(tmp, "etcd/member/wal"))
			return filepath.Join(tmp, "etcd"), nil
		},
		dangling: "member/wal",
	}, {
		name: "the data dir itself dangles",
		layout: func(t *testing.T, tmp string) (string, []Link) {
			symlink(t, filepath.Join(tmp, "disk1/etcd"), filepath.Join(tmp, "var/lib/etcd"))
			return filepath.Join(tmp, "var/lib/etcd"), nil
		},
		dangling: "var/lib/etcd",
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tmp := t.TempDir()
			src, wantLinks := c.layout(t, tmp)
			dst := filepath.Join(tmp, "backup")
			copied, _, err := CopyTreeSummed(src, dst, nil, 2)
			if c.dangling != "" {
				if !errors.Is(err, ErrDanglingLink) || !strings.Contains(err.Error(), c.dangling) {
					t.Fatalf("backup of a tree whose %s dangles: %v, want an error naming it", c.dangling, err)
				}
				if _, _, err := Checksum(src, nil); !errors.Is(err, ErrDanglingLink) {
					t.Errorf("Checksum: %v", err)
				}
				if _, err := Links(src, nil); !errors.Is(err, ErrDanglingLink) {
					t.Errorf("Links: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := paths(copied); !slices.Equal(got, c.files) {
				t.Fatalf("backed up %q, want %q", got, c.files)
			}
			summed, _, err := Checksum(src, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(summed, copied) {
				t.Errorf("Checksum %+v, CopyTreeSummed %+v", summed, copied)
			}
			if err := VerifyAgainstSource(dst, src, copied); err != nil {
				t.Error(err)
			}
			if err := Verify(dst, copied); err != nil {
				t.Error(err)
			}
			if !Unchanged(src, copied, nil) {
				t.Error("an untouched linked tree is not unchanged")
			}
			if err := RequireMemberFiles(copied); err != nil {
				t.Error(err)
			}
			links, err := Links(src, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(links, wantLinks) {
				t.Errorf("links %+v, want %+v", links, wantLinks)
			}
		})
	}
}

func TestUnchangedSeesThroughLinks(t *testing.T) {
	tmp := t.TempDir()
	writeFiles(t, filepath.Join(tmp, "etcd"), map[string]string{"member/snap/db": "bbolt"})
	writeFiles(t, filepath.Join(tmp, "waldisk"), map[string]string{seg0: "wal0"})
	symlink(t, filepath.Join(tmp, "waldisk"), filepath.Join(tmp, "etcd/member/wal"))
	src := filepath.Join(tmp, "etcd")
	sums, _, err := Checksum(src, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !Unchanged(src, sums, nil) {
		t.Fatal("an untouched tree is not unchanged")
	}
	writeFiles(t, filepath.Join(tmp, "waldisk"), map[string]string{seg1: "wal1"})
	if Unchanged(src, sums, nil) {
		t.Error("a segment added behind the link went unseen")
	}
	if err := os.RemoveAll(filepath.Join(tmp, "waldisk")); err != nil {
		t.Fatal(err)
	}
	if Unchanged(src, sums[:1], nil) {
		t.Error("a tree whose WAL link dangles is unchanged")
	}
}

func TestRequireMemberFiles(t *testing.T) {
	sums := func(paths ...string) []FileSum {
		var out []FileSum
		for _, p := range paths {
			out = append(out, FileSum{Path: p})
		}
		return out
	}
	cases := []struct {
		name  string
		files []FileSum
		err   string // "" for none
	}{
		{"data dir", sums("member/snap/db", "member/snap/0000000000000002-0000000000000010.snap", "member/wal/"+seg0), ""},
		{"member/ given as the tree", sums("snap/db", "wal/"+seg0), ""},
		{"PD data dir with its join file", sums("join", "member/snap/db", "member/wal/"+seg0), ""},
		{"nothing (a link to an unmounted disk)", nil, "holds no etcd member"},
		{"WAL link to an empty mount point", sums("member/snap/db"), "no WAL segment (member/wal/*.wal)"},
		{"only a preallocated segment", sums("member/snap/db", "member/wal/0.tmp"), "no WAL segment"},
		{"a segment one folder too deep", sums("member/snap/db", "member/wal/old/"+seg0), "no WAL segment"},
		{"no db", sums("member/wal/" + seg0), "no db (member/snap/db)"},
		{"member/ given, no db", sums("wal/" + seg0), "no db (snap/db)"},
		{"not etcd", sums("notes.txt"), "holds no etcd member"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := RequireMemberFiles(c.files)
			if c.err == "" && err != nil || c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)) {
				t.Errorf("RequireMemberFiles: %v, want %q", err, c.err)
			}
		})
	}
}

// A FIFO or a device in a data dir is not a file a backup can copy: the copy and the
// checksum both fail and name it, where they used to leave it out and pass every check.
func TestASpecialFileInTheTreeFailsTheBackup(t *testing.T) {
	src := t.TempDir()
	if err := os.MkdirAll(filepath.Join(src, "member", "snap"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "member", "snap", "db"), []byte("db"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A socket (etcd's unix:// listener made in its working folder) holds no data: left out.
	sock, err := net.Listen("unix", filepath.Join(src, "localhost:2379"))
	if err != nil {
		t.Fatal(err)
	}
	defer sock.Close()
	if files, _, err := CopyTreeSummed(src, filepath.Join(t.TempDir(), "copy"), nil, 2); err != nil || len(files) != 1 {
		t.Fatalf("copy beside a socket: %v %v, want member/snap/db alone", files, err)
	}
	if err := syscall.Mkfifo(filepath.Join(src, "member", "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := CopyTreeSummed(src, filepath.Join(t.TempDir(), "copy"), nil, 2); !errors.Is(err, ErrSpecialFile) || !strings.Contains(err.Error(), "fifo") {
		t.Errorf("copy: %v, want ErrSpecialFile naming member/fifo", err)
	}
	if _, _, err := Checksum(src, nil); !errors.Is(err, ErrSpecialFile) {
		t.Errorf("checksum: %v, want ErrSpecialFile", err)
	}
}
