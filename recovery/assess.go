// Package recovery rebuilds a cluster that lost quorum from its best surviving member, losing
// nothing that member had committed: plan (assess, choose the survivor, show what each choice
// loses), then apply (back up, force a one-member cluster, restart it clean, re-add the others
// one at a time as learners, verify), journaled so that an interrupted recovery resumes.
package recovery

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/etcdmedic/etcdmedic"

	"github.com/etcdmedic/etcdmedic/cluster"
	"github.com/etcdmedic/etcdmedic/runtime"
	"github.com/etcdmedic/etcdmedic/runtime/local"
	"github.com/etcdmedic/etcdmedic/runtime/staticpod"
)

// MemberInput is one member's data dir, as the operator names it (--data-dir NAME=PATH).
type MemberInput struct {
	Name    string
	DataDir string
	// WALDir is the member's --wal-dir when its WAL lives apart ("": member/wal).
	WALDir string
}

// Assessment is what plan found.
type Assessment struct {
	ClusterID   etcdmedic.ClusterID `json:"clusterID"`
	Candidates  []Candidate         `json:"candidates"`
	Survivor    string              `json:"survivor"`
	Override    bool                `json:"override"`
	Warnings    []string            `json:"warnings"`
	Quorum      string              `json:"quorum"`
	QuorumCheck *QuorumCheck        `json:"quorumCheck,omitempty"`
	// SurvivorBackup is the survivor's verified backup, taken by plan while it watched the
	// members it stopped ("" when it took none).
	SurvivorBackup string `json:"survivorBackup,omitempty"`
}

// ErrNotNeeded means the cluster has quorum: recovery would only do harm.
var ErrNotNeeded = errors.New("quorum is not lost")

// AssessOptions are what Assess needs besides the data dirs.
type AssessOptions struct {
	// Conn has the TLS files, user and timeouts to probe members with; its endpoints are
	// probed too (the members' own client URLs always are).
	Conn cluster.Conn
	// Survivor overrides the choice of the best member.
	Survivor string
	// Stopper is how a member found running on its data dir is stopped, once quorum is proven
	// lost (nil: a running member makes Assess refuse).
	Stopper func(c Candidate) runtime.Runtime
	// Settle is how long a member stopped by Assess is watched for a supervisor starting it
	// again (default 2 s).
	Settle time.Duration
	// Down names members the operator declares down for good (powered off, fenced): a member
	// that does not answer at all cannot be proven down otherwise.
	Down map[string]bool
	// FromSnapshot: the survivor is rebuilt from a snapshot, so a candidate's damaged pages do
	// not disqualify it (its data is replaced; its URLs and membership are what is used).
	FromSnapshot bool
	// BackupDir, when set, is where the survivor is backed up while Assess watches the members
	// it stopped (only then: the wait is spent anyway). The copy is kept only if they stayed
	// stopped; apply uses it as long as the survivor's data dir is unchanged.
	BackupDir string
	// Manifests are the members' static pod manifests by name: a backup keeps a copy.
	Manifests map[string]string
}

// Assess reads every member's data dir, proves quorum lost (failing closed), stops the members
// that still run on their data dirs and reads them too, ranks the candidates by their history,
// checks the best one whole (every db page, every WAL record) and chooses it as the survivor.
func Assess(ctx context.Context, members []MemberInput, o AssessOptions) (*Assessment, error) {
	if len(members) == 0 {
		return nil, errors.New("give every member's data dir: --data-dir NAME=PATH (one per member)")
	}
	a := &Assessment{Warnings: []string{}}
	for _, m := range members {
		a.Candidates = append(a.Candidates, readCandidate(m))
	}
	a.settleClusterID()
	// What the operator gave is checked before any member is probed, stopped or backed up.
	names := manifestNames(o.Manifests)
	if err := a.checkInput(o.BackupDir, names); err != nil {
		return a, err
	}
	qc, err := checkQuorumLost(ctx, o.Conn, a.quorumTargets(o.Down), o.Conn.Endpoints)
	a.QuorumCheck = qc
	if err != nil {
		return a, err
	}
	for _, s := range qc.Members {
		if c := a.find(s.Name); c != nil {
			c.Liveness = s
		}
	}
	a.Quorum = "lost: " + qc.String()
	stopped, err := a.stopRunning(ctx, o)
	if err != nil {
		return a, err
	}
	// A member that ran could not be read before: its member ID and name are known only now.
	if err := a.checkInput(o.BackupDir, names); err != nil {
		return a, err
	}
	keep := a.backUpWhileSettling(stopped, o)
	if err := a.choose(o.Survivor, !o.FromSnapshot); err != nil {
		return a, keep(func() error { return err })
	}
	// The survivor's whole read (and its backup) ran while a supervisor had time to start a
	// stopped member again: now it must still be stopped, or what was read may already be stale.
	return a, keep(func() error { return stopped.stayedStopped(ctx, a) })
}

// stoppedByPlan are the members Assess stopped, watched until settled for a supervisor that
// starts them again.
type stoppedByPlan struct {
	index   []int
	settled time.Time
}

func (s stoppedByPlan) stayedStopped(ctx context.Context, a *Assessment) error {
	if len(s.index) == 0 {
		return nil
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(time.Until(s.settled)):
	}
	for _, i := range s.index {
		c := a.Candidates[i]
		if err := local.VerifyStopped(c.RealDataDir); err != nil {
			return fmt.Errorf("%s was stopped and started again (by its supervisor?): %w; then plan again (nothing else was changed)", c.Name, restarted(err))
		}
	}
	return nil
}

// settleClusterID takes the cluster most data dirs belong to. A data dir of another cluster
// is never a survivor; NewPlan refuses to plan with it (otherCluster is the one policy).
func (a *Assessment) settleClusterID() {
	a.ClusterID = majorityCluster(a.Candidates)
	for i := range a.Candidates {
		c := &a.Candidates[i]
		if why := a.otherCluster(*c); c.Rejected == "" && why != "" {
			c.Rejected = why
		}
	}
}

// otherCluster says why c's data is not this cluster's ("" when it is, or holds no cluster
// ID): a wrong path or a volume mixed up, whose data the recovery must neither choose nor
// move aside as a member's old data.
func (a *Assessment) otherCluster(c Candidate) string {
	if c.ClusterID == etcdmedic.NoID || c.ClusterID == a.ClusterID {
		return ""
	}
	return fmt.Sprintf("its data belongs to cluster %s, not %s like the others", c.ClusterID, a.ClusterID)
}

// quorumTargets are the given members, and every other voter the readable data dirs name (a
// member left off the command line could still be up).
func (a *Assessment) quorumTargets(down map[string]bool) []quorumTarget {
	ref := a.membershipReference()
	var out []quorumTarget
	for i := range a.Candidates {
		c := &a.Candidates[i]
		fillURLs(c, ref)
		voter := true
		if ref != nil && (c.MemberID != etcdmedic.NoID || c.Wiped) {
			voter = standing(*c, *ref) == StandingVoter
		}
		out = append(out, quorumTarget{Name: c.Name, ID: c.MemberID, DataDir: c.RealDataDir, ClientURLs: c.ClientURLs, PeerURLs: c.PeerURLs, Voter: voter, Down: down[c.Name]})
	}
	if ref != nil {
		for _, m := range ref.Membership {
			if !a.given(m) && !m.IsLearner {
				out = append(out, quorumTarget{Name: m.ShortLabel(), ID: m.ID, ClientURLs: m.ClientURLs, PeerURLs: m.PeerURLs, Voter: true, Down: down[m.Name]})
			}
		}
	}
	return out
}

// given reports whether a data dir was given for member m of a membership: matched by member
// ID when the data dir names one (a name given twice, or given to another member's data,
// never stands for m), by name only for a data dir that names none (wiped, or running and
// not read yet). A member that has not published its name yet is known by its ID only.
func (a *Assessment) given(m etcdmedic.Member) bool {
	return slices.ContainsFunc(a.Candidates, func(c Candidate) bool {
		if c.MemberID != etcdmedic.NoID {
			return c.MemberID == m.ID
		}
		return m.Name != "" && c.Name == m.Name
	})
}

// ErrBadInput marks a plan refused for what the operator gave (two members on one folder, a
// member given under a name etcd does not know it by, a backup dir among a member's folders):
// refused before any member is probed or stopped, as long as every member could be read.
var ErrBadInput = errors.New("recover plan: bad input")

type badInput struct{ error }

func (badInput) Is(target error) bool { return target == ErrBadInput }

func refuseInput(format string, args ...any) error { return badInput{fmt.Errorf(format, args...)} }

// checkInput refuses what the operator gave that no recovery can carry out safely: two
// members on one folder or one member given twice, a name etcd does not know the member by,
// a backup dir among a member's folders.
func (a *Assessment) checkInput(backupDir string, etcdNames map[string]string) error {
	if err := checkDistinctMembers(a.Candidates); err != nil {
		return err
	}
	if err := a.checkNames(etcdNames); err != nil {
		return err
	}
	if backupDir == "" {
		return nil
	}
	return checkFolderOutsideMembers("--backup-dir", backupDir, a.Candidates)
}

// checkDistinctMembers refuses two members given one data dir or WAL dir (as written or
// through symlinks), and two data dirs holding one member (a copy, or a mixed-up path): the
// other member's real data would go unread and unbacked-up, the quorum proof would miss it (a
// healthy voter could be stopped), and the recovery could never finish.
func checkDistinctMembers(cs []Candidate) error {
	seen := map[string]memberDir{}
	byID := map[etcdmedic.ID]Candidate{}
	for _, c := range cs {
		for _, d := range c.dirs() {
			if other, ok := seen[d.path]; ok {
				return refuseInput("%s and %s are one folder: each member needs its own (plan reads every data dir on this host: give another node's where it is mounted here, or a path that does not exist for a wiped one)", other, d)
			}
			seen[d.path] = d
		}
		if c.MemberID == etcdmedic.NoID {
			continue
		}
		if other, ok := byID[c.MemberID]; ok {
			return refuseInput("the data dirs given for %s (%s) and %s (%s) both hold member %s: one of them is a copy or the wrong path; give each member its own data dir", other.Name, other.DataDir, c.Name, c.DataDir, c.MemberID)
		}
		byID[c.MemberID] = c
	}
	return nil
}

// checkNames refuses a member given under a name the cluster does not know it by. etcd runs
// under its own --name (a static pod's from its manifest), and a member rejoining under a name
// that --initial-cluster lacks is refused by etcd on every run ("couldn't find local name").
// etcdNames are the --name of the members' manifests.
func (a *Assessment) checkNames(etcdNames map[string]string) error {
	var ref []etcdmedic.Member
	if r := a.membershipReference(); r != nil {
		ref = r.Membership
	}
	for _, c := range a.Candidates {
		if a.otherCluster(c) != "" {
			continue // refused with its own reason: not this cluster's data
		}
		recorded := ""
		if c.MemberID != etcdmedic.NoID {
			recorded = recordedName(c.MemberID, ref, c.Membership)
		}
		if err := checkMemberName(c, recorded, etcdNames[c.Name]); err != nil {
			return err
		}
	}
	return nil
}

// recordedName is the name the first membership that records one gives member id ("" when
// none does: a learner that never started has published no name).
func recordedName(id etcdmedic.ID, views ...[]etcdmedic.Member) string {
	for _, ms := range views {
		if m := etcdmedic.Find(ms, id); m != nil && m.Name != "" {
			return m.Name
		}
	}
	return ""
}

// checkMemberName compares the name c was given with the name its membership records
// (recorded, "" when unknown) and with the --name of its manifest (inManifest, "" when none).
func checkMemberName(c Candidate, recorded, inManifest string) error {
	switch {
	case recorded != "" && recorded != c.Name:
		return refuseInput("the data dir given as %s (%s) holds member %s, which the cluster's membership calls %s: etcd knows it by that name, and it could not rejoin as %s (\"couldn't find local name\"); give it as %s=%s (and the same name in its other flags)", c.Name, c.DataDir, c.MemberID, recorded, c.Name, recorded, c.DataDir)
	case inManifest != "" && recorded != "" && inManifest != recorded:
		return refuseInput("%s's --kubeadm-manifest runs etcd with --name=%s, but the cluster's membership calls member %s %s: correct --name in the manifest to %s, or it could not rejoin (\"couldn't find local name\")", c.Name, inManifest, c.MemberID, recorded, recorded)
	case inManifest != "" && inManifest != c.Name:
		return refuseInput("%s's --kubeadm-manifest runs etcd with --name=%s: kubelet starts it under that name, and it could not rejoin as %s (\"couldn't find local name\"); give the member as %s (--data-dir %s=%s, --kubeadm-manifest %s=...)", c.Name, inManifest, c.Name, inManifest, inManifest, c.DataDir, inManifest)
	}
	return nil
}

// manifestNames are the --name flags of the members' static pod manifests, read where kubelet
// has them or where a stop moved them. A manifest that cannot be read is left to the plan's
// own check of it.
func manifestNames(manifests map[string]string) map[string]string {
	out := map[string]string{}
	for member, path := range manifests {
		r := staticpod.Runtime{Manifest: path}
		for _, p := range []string{r.Manifest, r.StoppedPath()} {
			b, err := os.ReadFile(p)
			if err != nil {
				continue
			}
			if flags, err := cluster.EtcdFlagsFromManifest(b); err == nil && flags["name"] != "" {
				out[member] = flags["name"]
			}
			break
		}
	}
	return out
}

// membershipReference is the readable candidate with the most history: its membership says
// who the voters are before the survivor is chosen.
func (a *Assessment) membershipReference() *Candidate {
	ranked := rank(a.Candidates)
	if len(ranked) == 0 {
		return nil
	}
	return a.find(ranked[0].Name)
}

// fillURLs takes a member's URLs from the reference membership when its own data has none.
func fillURLs(c *Candidate, ref *Candidate) {
	if ref == nil || (len(c.PeerURLs) > 0 && len(c.ClientURLs) > 0) {
		return
	}
	for _, m := range ref.Membership {
		if m.Name != c.Name {
			continue
		}
		if len(c.PeerURLs) == 0 {
			c.PeerURLs = m.PeerURLs
		}
		if len(c.ClientURLs) == 0 {
			c.ClientURLs = m.ClientURLs
		}
		if c.MemberID == etcdmedic.NoID {
			c.MemberID = m.ID
		}
	}
}

// stopRunning stops every member still running on its data dir (a supervisor restarted it
// while quorum was lost: it holds its data locked and serves nothing) and reads its data dir at
// once; stayedStopped proves by the locks, once settled, that it did not start again.
func (a *Assessment) stopRunning(ctx context.Context, o AssessOptions) (stoppedByPlan, error) {
	var stopped stoppedByPlan
	for i := range a.Candidates {
		c := &a.Candidates[i]
		if !c.Running {
			continue
		}
		if o.Stopper == nil {
			return stopped, fmt.Errorf("%s runs on %s: stop it first, then plan again", c.Name, c.DataDir)
		}
		how := "stopped"
		if held := local.Holders(c.RealDataDir); len(held) > 0 {
			p := local.Describe(held[0])
			how = fmt.Sprintf("pid %d (%s) stopped", p.PID, p.Command)
		}
		if err := stoppingQuorumLost(o.Stopper(*c)).Stop(ctx, runtime.MemberSpec{Name: c.Name, DataDir: c.RealDataDir}); err != nil {
			return stopped, fmt.Errorf("%s runs on %s and could not be stopped (nothing else was changed): %w", c.Name, c.DataDir, err)
		}
		c.StoppedByPlan = how
		stopped.index = append(stopped.index, i)
	}
	settle := o.Settle
	if settle == 0 {
		settle = 2 * time.Second
	}
	// A supervisor (systemd's Restart=always, kubelet) starts it again within moments: the
	// stop is checked again once settled (stayedStopped), after the reads.
	stopped.settled = time.Now().Add(settle)
	for _, i := range stopped.index {
		c := &a.Candidates[i]
		again := readCandidate(MemberInput{Name: c.Name, DataDir: c.DataDir, WALDir: c.WALDir})
		again.Liveness, again.StoppedByPlan = c.Liveness, c.StoppedByPlan
		again.Source = "data dir, read once plan had stopped the member"
		if again.Running {
			return stopped, fmt.Errorf("%s was stopped and started again at once (by its supervisor?): %w; then plan again (nothing else was changed)", c.Name, restarted(local.VerifyStopped(c.RealDataDir)))
		}
		*c = again
	}
	a.settleClusterID()
	return stopped, nil
}

// choose ranks the usable candidates, checks the best one whole and takes it (or the
// operator's --survivor), and states what the choice costs every other member.
func (a *Assessment) choose(survivor string, checkPages bool) error {
	for {
		ranked := rank(a.Candidates)
		if len(ranked) == 0 {
			return errors.New("no usable data dir: every candidate was rejected (see each one's reason)")
		}
		best := ranked[0].Name
		if survivor != "" {
			best = survivor
		}
		c := a.find(best)
		if c == nil {
			return fmt.Errorf("--survivor %s: no such member among the data dirs given", survivor)
		}
		if c.Rejected != "" {
			return fmt.Errorf("--survivor %s cannot be used: %s", survivor, c.Rejected)
		}
		if !checkPages {
			// Rebuilt from a snapshot: the survivor's own data is quarantined, not used.
		} else if problem := checkWhole(c.RealDataDir, c.WALDir); problem != "" {
			c.Rejected, c.Unreadable = problem, true
			a.Warnings = append(a.Warnings, fmt.Sprintf("%s has the most history, but %s: it cannot be the survivor", c.Name, problem))
			continue
		}
		a.Survivor, a.Override = best, survivor != "" && survivor != ranked[0].Name
		break
	}
	s := a.find(a.Survivor)
	for i := range a.Candidates {
		c := &a.Candidates[i]
		c.Standing = standing(*c, *s)
		if c.Rejected != "" || c.Name == s.Name {
			continue
		}
		if c.Kept() < s.Kept() {
			c.IndexGap = s.Kept() - c.Kept()
		} else {
			c.AheadIndex = c.Kept() - s.Kept()
		}
		if c.Revision < s.Revision {
			c.RevisionGap = s.Revision - c.Revision
		} else {
			c.AheadRevision = c.Revision - s.Revision
		}
		if a.Override && (c.AheadIndex > 0 || c.AheadRevision > 0) {
			a.Warnings = append(a.Warnings, fmt.Sprintf("--survivor %s loses what %s has beyond it: %d raft entries, %d revisions", s.Name, c.Name, c.AheadIndex, c.AheadRevision))
		}
	}
	return nil
}

func (a *Assessment) find(name string) *Candidate {
	for i := range a.Candidates {
		if a.Candidates[i].Name == name {
			return &a.Candidates[i]
		}
	}
	return nil
}

// SurvivorCandidate returns the chosen candidate.
func (a *Assessment) SurvivorCandidate() Candidate { return *a.find(a.Survivor) }

// restarted marks a member found running after plan stopped it: whoever holds it now started
// it again, so its parent is a supervisor whatever its name.
func restarted(err error) error {
	var again *local.StillRunning
	if errors.As(err, &again) {
		again.Restarted = true
	}
	return err
}
