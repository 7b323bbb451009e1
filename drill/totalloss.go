package drill

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/etcdmedic/etcdmedic/archive"
	"github.com/etcdmedic/etcdmedic/cluster"
	"github.com/etcdmedic/etcdmedic/ledger"
	"github.com/etcdmedic/etcdmedic/runtime/local"
	"github.com/etcdmedic/etcdmedic/sandbox"
	"github.com/etcdmedic/etcdmedic/store"
)

// TotalLoss is what the total-loss drill measured.
type TotalLoss struct {
	// CapturedRevision is the newest revision in the store when the disks were lost, and
	// RecoveryPointSec how long before the loss its change was captured.
	CapturedRevision int64   `json:"capturedRevision"`
	RecoveryPointSec float64 `json:"recoveryPointSeconds"`
	// RestoredRevision is the revision the restore reached: at least CapturedRevision, and the
	// point the restored cluster is judged at.
	RestoredRevision int64 `json:"restoredRevision"`
	// AckedAfterPoint are acknowledged writes newer than the restored revision: lost with
	// the disks, as the recovery point says. LostBeforePoint must be 0.
	AckedAfterPoint int `json:"ackedAfterPoint"`
	LostBeforePoint int `json:"lostBeforePoint"`
	// WorkloadWritesAfterPoint are the workload's acknowledged writes after the captured
	// revision (its history is judged up to it by history.CheckRestoredTo).
	WorkloadWritesAfterPoint int `json:"workloadWritesAfterPoint"`
}

// totalLoss: every member's disk destroyed under write load; the cluster rebuilt from the
// object store that etcdmedic backup run fed (a full backup and the history captured after
// it). Nothing acknowledged before the last captured revision may be lost.
func totalLoss(ctx context.Context, env Env, r *recorder) error {
	rt := local.Runtime{Command: env.Command}
	sb, err := sandbox.Up(ctx, sandbox.Options{Dir: filepath.Join(env.Dir, "sandbox"), Members: 3, Command: env.Command})
	if sb != nil {
		defer r.stopAll(sb, rt)
	}
	if err != nil {
		return err
	}
	r.say("3-member cluster up (%s)", sb.Dir)
	if err := r.startKubernetes(ctx, env, sb); err != nil {
		return err
	}
	cli, w, err := r.underLoad(ctx, sb)
	if err != nil {
		return err
	}
	defer cli.Close()
	defer w.Abandon() // a drill that failed early: the judge stopped it otherwise
	storeURL := "file://" + filepath.Join(env.Dir, "store")
	st, err := store.Open(ctx, storeURL, store.Options{Create: true})
	if err != nil {
		return err
	}
	defer st.Close()
	conn := cluster.DefaultConn()
	conn.Endpoints = sb.Endpoints()
	var mu sync.Mutex
	var captured int64
	var capturedAt time.Time
	runCtx, stopRun := context.WithCancel(ctx)
	done := make(chan error, 1)
	ended := false
	defer func() { // a drill that fails early waits for the run too: it says things till it ends
		stopRun()
		if !ended {
			<-done
		}
	}()
	go func() {
		done <- archive.Run(runCtx, archive.RunOptions{Conn: conn, Store: st, FullEvery: time.Hour, Segment: time.Second, Scratch: filepath.Join(env.Dir, "scratch"),
			Say: func(format string, a ...any) { r.say("  backup run: "+format, a...) },
			OnStored: func(s archive.Segment, at time.Time) {
				mu.Lock()
				captured, capturedAt = s.To, at
				mu.Unlock()
			}})
	}()
	r.say("etcdmedic backup run started: full backup, then every change stored each second into %s", storeURL)
	w.RunUntil(ctx, MinOperations, 6*time.Second, minOperationsWithin) // the history judged is the one before the loss
	// The loss comes once the store holds history: a full backup alone would leave nothing
	// captured to judge the restore by.
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline) && ctx.Err() == nil; time.Sleep(100 * time.Millisecond) {
		mu.Lock()
		some := captured > 0
		mu.Unlock()
		if some {
			break
		}
	}

	for _, m := range sb.Members {
		sb.KillMember(m.Name)
		if err := os.RemoveAll(m.DataDir); err != nil {
			return err
		}
	}
	lossAt := time.Now()
	r.say("every member killed and its disk wiped: the whole cluster's data is gone")
	time.Sleep(time.Second) // the writes go on failing
	stopRun()
	runErr := <-done
	ended = true
	r.ledger.Stop()
	h := w.Abandon() // before the restore (a client would see the cluster go back to the point); the watchers cannot catch up with a cluster that is gone
	mu.Lock()
	tl := &TotalLoss{CapturedRevision: captured, RecoveryPointSec: lossAt.Sub(capturedAt).Seconds()}
	mu.Unlock()
	r.result.TotalLoss = tl
	if runErr != nil && !errors.Is(runErr, context.Canceled) && !errors.Is(runErr, context.DeadlineExceeded) {
		return fmt.Errorf("backup run: %w", runErr)
	}
	if tl.CapturedRevision == 0 {
		return errors.New("the store captured no history before the loss (no segment stored): nothing to judge a restore by")
	}
	r.say("the store holds the history up to revision %d, captured %.1fs before the loss", tl.CapturedRevision, tl.RecoveryPointSec)

	r.repair = time.Now()
	point, err := archive.Choose(ctx, st, 0, time.Time{})
	if err != nil {
		return err
	}
	var targets []archive.Target
	for _, m := range sb.Members {
		targets = append(targets, archive.Target{Name: m.Name, DataDir: m.DataDir, PeerURL: m.PeerURL})
	}
	etcdutl := append(append([]string{}, env.Command[:len(env.Command)-1]...), "etcdutl")
	ro := archive.RestoreOptions{Etcdutl: etcdutl, Etcd: env.Command, Scratch: filepath.Join(env.Dir, "scratch")}
	if r.kube != nil {
		// Under running apiservers: revisions must never go back (see the README's restore
		// section). What they acknowledged after the recovery point is gone with the disks.
		ro.BumpRevision, ro.MarkCompacted, r.kube.restoredOlder = 1_000_000_000, true, true
	}
	res, err := archive.Restore(ctx, st, point, targets, ro)
	if err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	r.say("etcdmedic restore: backup %s and %d revisions of history replayed, to revision %d, into every member's data dir", res.Backup, res.Replayed, res.Revision)
	tl.RestoredRevision = res.Revision
	if res.Revision < tl.CapturedRevision {
		return fmt.Errorf("restore reached revision %d, short of the %d the store captured before the loss", res.Revision, tl.CapturedRevision)
	}
	for _, m := range sb.Members {
		if err := sb.StartMember(m.Name); err != nil {
			return err
		}
	}
	if err := sb.WaitReady(ctx, time.Minute); err != nil {
		return err
	}
	serving := time.Now()
	r.result.Repair = "etcdmedic restore (from backup run's store)"
	r.result.RepairSec = time.Since(r.repair).Seconds()
	r.say("3 members started on the restored data dirs: serving")
	if err := r.checkKubernetes(ctx, sb.Endpoints()); err != nil {
		return err
	}
	// Judged at the revision the restore reached (at least what the store captured, checked
	// above): every write acknowledged up to it must be there, as the history has it.
	if tl.WorkloadWritesAfterPoint, err = r.judgeRestored(ctx, h, sb.Endpoints(), tl.RestoredRevision, lossAt, serving); err != nil {
		return err
	}
	r.say("workload: %d acknowledged writes after the recovery point, revision %d (gone with the disks)", tl.WorkloadWritesAfterPoint, tl.RestoredRevision)
	return r.countTotalLoss(ctx, sb.Endpoints(), tl)
}

// countTotalLoss checks every acknowledged write up to the restored revision against the
// restored cluster (each missing one is lost by the restore), and counts the ones after it.
func (r *recorder) countTotalLoss(ctx context.Context, endpoints []string, tl *TotalLoss) error {
	acked := r.ledger.Acked()
	var before []ledger.Write
	for _, w := range acked {
		if w.Revision <= tl.RestoredRevision {
			before = append(before, w)
		} else {
			tl.AckedAfterPoint++
		}
	}
	missing, err := missingAfterRepair(ctx, endpoints, before)
	if err != nil {
		return err
	}
	tl.LostBeforePoint = len(missing)
	r.result.Acked, r.result.Failed, r.result.Lost = len(acked), r.ledger.Failed(), len(missing)
	r.say("%d writes acknowledged: %d up to the recovery point, %d lost by the restore; %d after it (gone with the disks, %.1fs of writes)", len(acked), len(before), len(missing), tl.AckedAfterPoint, tl.RecoveryPointSec)
	return nil
}
