package recovery

import (
	"cmp"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/etcdmedic/etcdmedic"
)

// at is a member given as NAME=DIR whose data names member id (0: wiped, or not read yet).
func at(name, dir string, id etcdmedic.ID) Candidate {
	return Candidate{Name: name, DataDir: dir, RealDataDir: dir, MemberID: id, ClusterID: 0xc1}
}

func withWAL(c Candidate, dir string) Candidate {
	c.WALDir = dir
	return c
}

// wantRefusal checks err against want: "" for none, else a refusal for bad input whose text
// holds every "|"-separated part (each name and path the operator must see).
func wantRefusal(t *testing.T, err error, want string) {
	t.Helper()
	if want == "" {
		if err != nil {
			t.Fatalf("refused: %v", err)
		}
		return
	}
	if !errors.Is(err, ErrBadInput) {
		t.Fatalf("%v, want a refusal for bad input naming %q", err, want)
	}
	for _, part := range strings.Split(want, "|") {
		if !strings.Contains(err.Error(), part) {
			t.Fatalf("%v, want it to say %q", err, part)
		}
	}
}

// Review item 2: one member's data dir given under two names (or two data dirs holding one
// member) leaves the other member unread, unproven down and never finished.
func TestEachMemberHasItsOwnDataDir(t *testing.T) {
	tmp := t.TempDir()
	real, link := filepath.Join(tmp, "disk1", "etcd"), filepath.Join(tmp, "var-lib-etcd")
	os.MkdirAll(real, 0o700)
	os.Symlink(real, link)
	for _, tc := range []struct {
		name string
		cs   []Candidate
		want string
	}{
		{"three members, three folders",
			[]Candidate{at("m1", "/d/a", 1), at("m2", "/d/b", 2), at("m3", "/d/c", 3)}, ""},
		{"one path given for m1 and m2 (the review's repro)",
			[]Candidate{at("m1", "/d/a", 1), at("m2", "/d/a", 1), at("m3", "/d/c", 3)}, "m1's data dir /d/a|m2's data dir /d/a|one folder"},
		{"one folder written two ways",
			[]Candidate{at("m1", "/d/a", 1), at("m2", "/d/x/../a/", 0)}, "m1's data dir /d/a|m2's data dir /d/a"},
		{"one folder, once through a symlink (kubeadm's /var/lib/etcd on a disk of its own)",
			[]Candidate{at("m1", real, 1), {Name: "m2", DataDir: link, MemberID: 1}}, "m1's data dir " + real + "|m2's data dir " + real},
		{"two wiped members at one missing path",
			[]Candidate{at("m1", "/d/gone", 0), at("m2", "/d/gone", 0)}, "m1's data dir /d/gone|m2's data dir /d/gone"},
		{"a WAL dir apart that is another member's data dir",
			[]Candidate{withWAL(at("m1", "/d/a", 1), "/d/b"), at("m2", "/d/b", 2)}, "m1's WAL dir /d/b|m2's data dir /d/b"},
		{"two members' WAL dirs on one folder",
			[]Candidate{withWAL(at("m1", "/d/a", 1), "/wal"), withWAL(at("m2", "/d/b", 2), "/wal")}, "m1's WAL dir /wal|m2's WAL dir /wal"},
		{"a copy of m1's data dir given as m2",
			[]Candidate{at("m1", "/d/a", 1), at("m2", "/backup/a", 1)}, "m1 (/d/a)|m2 (/backup/a)|both hold member 1"},
		{"wiped members hold no member ID: no clash",
			[]Candidate{at("m1", "/d/a", 0), at("m2", "/d/b", 0), at("m3", "/d/c", 3)}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) { wantRefusal(t, checkDistinctMembers(tc.cs), tc.want) })
	}
}

// Review item 2: a voter counts as given only for a data dir holding it (by member ID), never
// for a name given to another member's data; by name only for a data dir that names no member.
func TestEveryVoterIsGivenByItsMemberID(t *testing.T) {
	voters := []etcdmedic.Member{{ID: 1, Name: "m1"}, {ID: 2, Name: "m2"}, {ID: 3, Name: "m3"}}
	for _, tc := range []struct {
		name       string
		cs         []Candidate
		membership []etcdmedic.Member
		want       string // "" for given, else the refusal
	}{
		{"each voter's own data dir", []Candidate{at("m1", "/a", 1), at("m2", "/b", 2), at("m3", "/c", 3)}, voters, ""},
		{"m2's name on m1's data: m2 is not given",
			[]Candidate{at("m1", "/a", 1), at("m2", "/a2", 1), at("m3", "/c", 3)}, voters, "m2 is a voter in m1's membership"},
		{"a wiped member is given by its name", []Candidate{at("m1", "/a", 1), at("m2", "/b", 0), at("m3", "/c", 3)}, voters, ""},
		{"a voter that never published its name is given by its ID",
			[]Candidate{at("m1", "/a", 1), at("m2", "/b", 2), at("m3", "/c", 3), at("m4", "/d", 4)},
			append(slices.Clone(voters), etcdmedic.Member{ID: 4}), ""},
		{"a learner may be left out", []Candidate{at("m1", "/a", 1), at("m2", "/b", 2), at("m3", "/c", 3)},
			append(slices.Clone(voters), etcdmedic.Member{ID: 4, Name: "m4", IsLearner: true}), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cs[0].Membership = tc.membership
			err := checkEveryVoterGiven(&Assessment{Candidates: tc.cs}, tc.cs[0])
			if (err == nil) != (tc.want == "") || (err != nil && !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("%v, want %q", err, tc.want)
			}
		})
	}
}

// The review's repro, at the quorum proof: with m2's name on m1's data, member 2 (possibly up,
// with m3 a quorum) is still probed.
func TestQuorumTargetsIncludeAVoterWhoseNameWasGivenToOtherData(t *testing.T) {
	ms := []etcdmedic.Member{{ID: 1, Name: "m1"}, {ID: 2, Name: "m2", ClientURLs: []string{"http://10.0.0.2:2379"}}, {ID: 3, Name: "m3"}}
	a := &Assessment{ClusterID: 0xc1}
	for _, c := range []Candidate{logOf("m1", 5, 100, 100, 100), logOf("m2", 5, 100, 100, 100), logOf("m3", 5, 90, 90, 90)} {
		c.Membership = ms
		a.Candidates = append(a.Candidates, c)
	}
	a.Candidates[0].MemberID, a.Candidates[1].MemberID, a.Candidates[2].MemberID = 1, 1, 3
	targets := a.quorumTargets(nil)
	if !slices.ContainsFunc(targets, func(q quorumTarget) bool { return q.ID == 2 && slices.Contains(q.ClientURLs, "http://10.0.0.2:2379") }) {
		t.Fatalf("targets %+v: member 2 is not probed", targets)
	}
}

// Review item 6: etcd runs under the name its membership (and a static pod's manifest) has;
// a member given under another cannot rejoin.
func TestMemberIsGivenUnderTheNameEtcdKnows(t *testing.T) {
	for _, tc := range []struct {
		name                 string
		c                    Candidate
		recorded, inManifest string
		want                 string
	}{
		{"the name the membership records", at("m1", "/var/lib/etcd", 1), "m1", "", ""},
		{"kubeadm's master-1 given as m1", at("m1", "/var/lib/etcd", 1), "master-1", "", "calls master-1|give it as master-1=/var/lib/etcd"},
		{"a learner that never started has no name on record", at("m4", "/d/m4", 4), "", "", ""},
		{"its manifest runs etcd under another name", at("m1", "/var/lib/etcd", 0), "", "master-1", "--name=master-1|give the member as master-1"},
		{"label, membership and manifest agree", at("master-1", "/var/lib/etcd", 1), "master-1", "master-1", ""},
		{"the manifest disagrees with the membership", at("master-1", "/var/lib/etcd", 1), "master-1", "m1", "--name=m1|correct --name in the manifest to master-1"},
	} {
		t.Run(tc.name, func(t *testing.T) { wantRefusal(t, checkMemberName(tc.c, tc.recorded, tc.inManifest), tc.want) })
	}
}

// The name on record is the most up-to-date membership's, else the member's own data's.
func TestRecordedName(t *testing.T) {
	ref := []etcdmedic.Member{{ID: 1, Name: "master-1"}, {ID: 4}}
	own := []etcdmedic.Member{{ID: 1, Name: "old-name"}, {ID: 4, Name: "m4"}}
	for _, tc := range []struct {
		name string
		id   etcdmedic.ID
		want string
	}{
		{"the reference's record first", 1, "master-1"},
		{"no name in the reference: the member's own record", 4, "m4"},
		{"in no membership", 9, ""},
	} {
		if got := recordedName(tc.id, ref, own); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

// A manifest's --name is read where kubelet has it, or where plan's stop moved it.
func TestManifestNames(t *testing.T) {
	dir := t.TempDir()
	here, moved := filepath.Join(dir, "n1", "manifests", "etcd.yaml"), filepath.Join(dir, "n2", "manifests", "etcd.yaml")
	for path, name := range map[string]string{here: "master-1", filepath.Join(dir, "n2", "etcdmedic-stopped", "etcd.yaml"): "master-2"} {
		os.MkdirAll(filepath.Dir(path), 0o700)
		os.WriteFile(path, []byte("apiVersion: v1\nkind: Pod\nspec:\n  containers:\n  - name: etcd\n    command:\n    - etcd\n    - --name="+name+"\n    - --data-dir=/var/lib/etcd\n"), 0o600)
	}
	got := manifestNames(map[string]string{"m1": here, "m2": moved, "m3": filepath.Join(dir, "none.yaml")})
	if got["m1"] != "master-1" || got["m2"] != "master-2" || got["m3"] != "" {
		t.Fatalf("%v", got)
	}
}

// Review item 7: a backup dir among a member's folders is moved aside with that member's old
// data, and copied again into the next member's backup.
func TestBackupDirLiesOutsideEveryMember(t *testing.T) {
	tmp := t.TempDir()
	real, link := filepath.Join(tmp, "disk1", "etcd"), filepath.Join(tmp, "var-lib-etcd")
	os.MkdirAll(real, 0o700)
	os.Symlink(real, link)
	members := []Candidate{at("m1", real, 1), withWAL(at("m2", "/d/b", 2), "/wal/b"), at("m3", "/d/gone/m3", 0)}
	for _, tc := range []struct {
		name, backupDir, want string
	}{
		{"a folder of its own", "/backups/etcd", ""},
		{"a sibling whose name starts alike", "/d/b-backups", ""},
		{"a member's data dir itself", "/d/b", "--backup-dir /d/b|m2's data dir /d/b"},
		{"inside a member's data dir", "/d/b/backups", "lies inside, m2's data dir /d/b"},
		{"inside a member's WAL dir", "/wal/b/x", "m2's WAL dir /wal/b"},
		{"inside a data dir reached through a symlink", filepath.Join(link, "backups"), "m1's data dir " + real},
		{"holding a wiped member's data dir", "/d/gone", "holds m3's data dir /d/gone/m3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantRefusal(t, checkFolderOutsideMembers("--backup-dir", tc.backupDir, members), tc.want)
		})
	}
}

// End to end through MakePlan: each bad input is refused before any member is probed (no
// quorum check ran) or anything is written (no plan, no backup).
func TestMakePlanRefusesBadInputBeforeProbing(t *testing.T) {
	tmp := t.TempDir()
	a, c := filepath.Join(tmp, "a"), filepath.Join(tmp, "c")
	for name, tc := range map[string]struct {
		members   []MemberInput
		backupDir string
		want      string
		planDir   string // "": a folder of its own
	}{
		"one data dir for m1 and m2": {[]MemberInput{{Name: "m1", DataDir: a}, {Name: "m2", DataDir: a}, {Name: "m3", DataDir: c}},
			filepath.Join(tmp, "backups"), "m1's data dir " + a + " and m2's data dir " + a, ""},
		"the backup dir inside m3's data dir": {[]MemberInput{{Name: "m1", DataDir: a}, {Name: "m3", DataDir: c}},
			filepath.Join(c, "backups"), "m3's data dir " + c, ""},
		// The recovery moves m1's data dir into quarantine, and the journal a rerun resumes
		// from would go with it.
		"the plan dir inside m1's data dir": {[]MemberInput{{Name: "m1", DataDir: a}, {Name: "m3", DataDir: c}},
			filepath.Join(tmp, "backups"), "--plan-dir " + filepath.Join(a, "plan") + " is, or lies inside, m1's data dir " + a, filepath.Join(a, "plan")},
	} {
		t.Run(name, func(t *testing.T) {
			planDir := cmp.Or(tc.planDir, filepath.Join(t.TempDir(), "plan"))
			_, as, err := MakePlan(context.Background(), MakePlanOptions{PlanDir: planDir, Members: tc.members,
				Assess: AssessOptions{BackupDir: tc.backupDir}, Plan: PlanOptions{BackupDir: tc.backupDir}})
			wantRefusal(t, err, tc.want)
			if as != nil && as.QuorumCheck != nil {
				t.Fatalf("assessment %+v: the members were probed", as)
			}
			unwritten := []string{filepath.Join(planDir, "plan.json"), tc.backupDir}
			if tc.planDir != "" {
				unwritten = append(unwritten, planDir+".etcdmedic.lock") // not even the run lock, in m1's folder
			}
			for _, dir := range unwritten {
				if _, err := os.Stat(dir); err == nil {
					t.Errorf("%s was written", dir)
				}
			}
		})
	}
}
