package drill

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"

	"github.com/etcdmedic/etcdmedic/internal/crashfs"
	"github.com/etcdmedic/etcdmedic/ledger"
	"github.com/etcdmedic/etcdmedic/runtime/local"
	"github.com/etcdmedic/etcdmedic/sandbox"
)

// PowerCut is what a power cut left and what each way of recovering from it kept.
type PowerCut struct {
	Survivor string `json:"survivor"`
	// Wiped are the members whose disks were lost with the cut (the leader among them).
	Wiped []string `json:"wiped"`
	// Dropped is what the cut dropped on each member's disk: unsynced writes, torn pages.
	Dropped map[string]string `json:"dropped"`
	// QuietMs is how long after the last write the power went.
	QuietMs int `json:"quietMs"`
	// The survivor's log after the cut: its end, its commit index on disk, its db's
	// consistent index, and how its WAL ended ("" when cleanly, else "torn-write", ...).
	LastIndex       uint64 `json:"lastIndex"`
	Commit          uint64 `json:"commit"`
	ConsistentIndex uint64 `json:"consistentIndex"`
	Tail            string `json:"tail,omitempty"`
	// EntriesRunbookDrops are the survivor's entries past max(commit, consistent index), which
	// --force-new-cluster discards; AckedRunbookDrops the acknowledged writes among them.
	EntriesRunbookDrops uint64 `json:"entriesRunbookDrops"`
	AckedRunbookDrops   int    `json:"ackedRunbookDrops"`
	// AckedOnSurvivor are the acknowledged writes the survivor's disk held; AckedLostWithDisks
	// those only the wiped disks held (a quorum of two, both lost: no tool can bring them back).
	AckedOnSurvivor    int `json:"ackedOnSurvivor"`
	AckedLostWithDisks int `json:"ackedLostWithDisks"`
}

// powerCutWriters is how many ledger clients write at once, each at powerCutRate puts a
// second, beside the workload, for powerCutLoad before the cut.
const (
	powerCutWriters = 4
	powerCutRate    = 100
	powerCutLoad    = 10 * time.Second
)

// powerCut: three members, each on its own crash filesystem, under write load; the power of
// the whole cluster is cut (every write not fsynced is dropped, the last one torn), the
// leader's disk and a follower's are lost, and etcdmedic recovers from the third. Counted:
// what the runbook's --force-new-cluster would have dropped, and what etcdmedic lost (0).
func powerCut(ctx context.Context, env Env, r *recorder) error {
	rt := local.Runtime{Command: env.Command}
	disks := map[string]crashfs.Disk{}
	defer func() {
		for _, d := range disks {
			d.Unmount()
		}
	}()
	backing := func(name string) string { return filepath.Join(env.Dir, "disks", name) }
	plugIn := func(m sandbox.Member) error {
		if err := os.MkdirAll(backing(m.Name), 0o700); err != nil {
			return err
		}
		if len(env.CrashFS) == 0 {
			return fmt.Errorf("no crash filesystem server: %w", crashfs.ErrUnavailable)
		}
		d, err := crashfs.Start(env.CrashFS, backing(m.Name), m.DataDir)
		if err != nil {
			return err
		}
		disks[m.Name] = d
		return nil
	}
	sb, err := sandbox.Up(ctx, sandbox.Options{Dir: filepath.Join(env.Dir, "sandbox"), Members: 3, Command: env.Command, BeforeStart: plugIn})
	if sb != nil {
		defer r.stopAll(sb, rt)
	}
	if errors.Is(err, crashfs.ErrUnavailable) {
		return skipped{fmt.Sprintf("members run on a FUSE crash filesystem, which needs root and /dev/fuse (%v)", err)}
	}
	if err != nil {
		return err
	}
	r.say("3-member cluster up, each member on its own crash filesystem (unsynced writes are lost at a cut)")
	if err := r.startKubernetes(ctx, env, sb); err != nil {
		return err
	}
	writers, err := startWriters(ctx, sb)
	if err != nil {
		return err
	}
	defer writers.stop()
	r.say("write load started: %d clients, %d puts/s each", powerCutWriters, powerCutRate)
	w, err := r.startWorkloadOf(ctx, sb, 24) // each member syncs through FUSE: slower commits
	if err != nil {
		return err
	}
	defer w.Abandon() // a drill that failed early: the judge stopped it otherwise
	time.Sleep(powerCutLoad)

	leader, follower, survivor := roles(ctx, sb)
	// The workload pauses until the survivor's log holds all it acknowledged: what only the
	// lost disks held is gone whatever the repair (the ledger writers go on and count that).
	w.Pause()
	if r.kube != nil {
		r.kube.w.Pause()
	}
	// A write that timed out just before the pause may still be in the leader's pipeline: if it
	// committed after the commit index waitApplied reads, on the two disks the cut wipes, a
	// watcher could see a revision the recovered cluster hands out again. Let it commit first.
	time.Sleep(pendingProposalsSettle)
	if err := waitApplied(ctx, sb, survivor, 5*time.Second); err != nil {
		return err
	}
	r.say("workload paused: everything it acknowledged is in %s's log (the ledger writers go on)", survivor)
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 11))
	pc := &PowerCut{Survivor: survivor, Wiped: []string{leader, follower}, Dropped: map[string]string{}, QuietMs: rng.IntN(100)}
	r.result.PowerCut = pc
	// The writes stop, and the power goes a moment later: the last acknowledged batch is
	// committed on the followers by messages they never sync (etcd does not fsync a HardState
	// whose only change is the commit index), and their db applies it within its 100 ms batch.
	writers.stop()
	time.Sleep(time.Duration(pc.QuietMs) * time.Millisecond)
	for _, m := range sb.Members {
		sb.KillMember(m.Name)
	}
	for _, m := range sb.Members {
		rep, err := disks[m.Name].Cut(crashfs.CutOptions{Tear: true, Rand: rng})
		if err != nil {
			return fmt.Errorf("power cut on %s: %w", m.Name, err)
		}
		delete(disks, m.Name)
		pc.Dropped[m.Name] = rep.String()
	}
	r.say("POWER CUT %d ms after the last write: every member killed at once, every write not fsynced dropped", pc.QuietMs)
	for _, m := range sb.Members {
		r.say("  %s: %s", m.Name, pc.Dropped[m.Name])
	}

	for _, name := range pc.Wiped {
		if err := os.RemoveAll(backing(name)); err != nil {
			return err
		}
	}
	for _, m := range sb.Members {
		if err := plugIn(m); err != nil {
			return fmt.Errorf("power back on %s: %w", m.Name, err)
		}
	}
	r.say("power back: %s's and %s's disks lost (empty), %s's disk as the cut left it", leader, follower, survivor)

	sm, _ := sb.Member(survivor)
	disk, err := readSurvivorDisk(sm.DataDir, env.Dir)
	if err != nil {
		return err
	}
	acked := writers.acked()
	pc.LastIndex, pc.Commit, pc.ConsistentIndex, pc.Tail = disk.LastIndex, disk.Commit, disk.ConsistentIndex, disk.Tail
	pc.EntriesRunbookDrops = disk.LastIndex - min(disk.LastIndex, disk.RunbookKeeps())
	for _, w := range acked {
		switch {
		case !disk.Holds(w):
			pc.AckedLostWithDisks++
		case disk.RunbookDrops(w):
			pc.AckedOnSurvivor++
			pc.AckedRunbookDrops++
		default:
			pc.AckedOnSurvivor++
		}
	}
	r.say("%s's log: last index %d, commit index %d on disk, db at %d; --force-new-cluster alone would drop %d entries holding %d acknowledged writes",
		survivor, disk.LastIndex, disk.Commit, disk.ConsistentIndex, pc.EntriesRunbookDrops, pc.AckedRunbookDrops)

	if err := r.recoverQuorum(ctx, env, sb, rt); err != nil {
		return err
	}
	w.Resume()
	if r.kube != nil {
		r.kube.w.Resume()
	}
	r.say("workload resumed on the repaired cluster")
	w.RunUntil(ctx, MinOperations, 2*time.Second, minOperationsWithin)
	if err := r.judge(ctx, w, sb.Endpoints()); err != nil {
		return err
	}
	if err := r.checkKubernetes(ctx, sb.Endpoints()); err != nil {
		return err
	}
	return r.countHeld(ctx, sb.Endpoints(), acked, disk)
}

// pendingProposalsSettle is the wait after the workload's pause before the commit index the
// survivor must apply is read: a proposal whose client gave up commits within it on a cluster
// that still commits (the ledger writers go on, so the index never stands still).
const pendingProposalsSettle = time.Second

// waitApplied waits until member's db has applied every entry the cluster's leader had
// committed when it was called: etcd applies only entries its log has synced, so they are on
// the member's disk.
func waitApplied(ctx context.Context, sb *sandbox.Sandbox, member string, timeout time.Duration) error {
	cli, err := sb.Client()
	if err != nil {
		return err
	}
	defer cli.Close()
	m, err := sb.Member(member)
	if err != nil {
		return err
	}
	sctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var committed uint64
	for _, ep := range sb.Endpoints() {
		if st, err := cli.Status(sctx, ep); err == nil && st.Leader == st.Header.MemberId {
			committed = st.RaftIndex
		}
	}
	for {
		st, err := cli.Status(sctx, m.ClientURL)
		if err == nil && committed > 0 && st.RaftAppliedIndex >= committed {
			return nil
		}
		select {
		case <-sctx.Done():
			return fmt.Errorf("%s did not apply the leader's commit index %d within %s (last: %v)", member, committed, timeout, err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// roles names the leader, another member, and the member that survives the cut.
func roles(ctx context.Context, sb *sandbox.Sandbox) (leader, follower, survivor string) {
	var others []string
	for _, st := range sb.Status(ctx) {
		if st.Leader && leader == "" {
			leader = st.Name
		} else {
			others = append(others, st.Name)
		}
	}
	if leader == "" { // no leader answered: any two
		leader, others = others[0], others[1:]
	}
	return leader, others[0], others[1]
}

// countHeld checks every acknowledged write the survivor's disk held against the repaired
// cluster: each one missing is lost by the repair.
func (r *recorder) countHeld(ctx context.Context, endpoints []string, acked []ledger.Write, disk *survivorDisk) error {
	var held []ledger.Write
	for _, w := range acked {
		if disk.Holds(w) {
			held = append(held, w)
		}
	}
	missing, err := missingAfterRepair(ctx, endpoints, held)
	if err != nil {
		return err
	}
	r.result.Acked, r.result.Lost = len(acked), len(missing)
	r.say("%d writes acknowledged, %d of them on the surviving disk, %d only on the lost disks; %d of those on the surviving disk lost by the repair",
		len(acked), len(held), len(acked)-len(held), len(missing))
	return nil
}
