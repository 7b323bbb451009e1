package recovery

import (
	"context"
	"fmt"
	goruntime "runtime"
	"sync"
	"time"
)

// foregroundWorkers copy files in parallel when nothing else waits: one per CPU, up to 4.
func foregroundWorkers() int { return min(4, goruntime.NumCPU()) }

// Backups come first for the survivor, whose data the rebuild changes at once. The other
// members' data dirs stay untouched until their own rejoin step, so they are copied in the
// background while the survivor is rebuilt, and each rejoin waits for its member's verified
// backup before it moves anything. The background copies start once the survivor's etcd has
// loaded its data (it answers a status request): reading and hashing gigabytes on the same
// CPUs and disk slowed that load by a second at 1 GiB, while the cluster took no writes; the
// election that follows leaves them idle. Runbook members whose data dir is not readable here are
// archived by the operator, at a checkpoint, up front.

// backupFirst backs up the survivor and every member the operator archives, then starts the
// background copies of the others.
// The background copies run under ctx: once it is cancelled, a copy not begun is not begun
// and the one running stops at its next stage (its .partial is thrown away on the next run).
func (a *Applier) backupFirst(ctx context.Context) error {
	var later []PlanMember
	for _, m := range a.Plan.Members {
		if m.Name == a.Plan.Survivor || m.Runbook != "" {
			if err := a.backupOne(ctx, m, foregroundWorkers()); err != nil {
				return err
			}
			continue
		}
		later = append(later, m)
	}
	// The goroutine gets its own list of channels: the map is this goroutine's alone
	// (ensureBackup deletes from it while copies still run).
	a.background = map[string]chan error{}
	done := make([]chan error, len(later))
	for i, m := range later {
		done[i] = make(chan error, 1)
		a.background[m.Name] = done[i]
	}
	loaded := a.survivorLoaded
	if loaded == nil {
		loaded = newGate()
		loaded.open()
	}
	a.backgroundDone = make(chan struct{})
	go func() {
		defer close(a.backgroundDone)
		loaded.wait(a.Timeout)
		for i, m := range later {
			if ctx.Err() != nil {
				done[i] <- fmt.Errorf("apply stopped before this copy began: %w", context.Cause(ctx))
				continue
			}
			if a.beforeBackgroundCopy != nil {
				a.beforeBackgroundCopy(m)
			}
			done[i] <- a.backupOne(ctx, m, foregroundWorkers()) // the survivor has loaded its data
		}
	}()
	if len(later) > 0 {
		a.say("backing up %d more data dirs in the background; each is verified before its member is touched", len(later))
	}
	return nil
}

// ensureBackup returns once m's backup is verified: the background copy when one runs (in this
// process), or a copy made now (after an interruption, or when verification failed).
func (a *Applier) ensureBackup(ctx context.Context, m PlanMember) error {
	if ch, ok := a.background[m.Name]; ok {
		delete(a.background, m.Name)
		err := <-ch
		if err == nil {
			return nil
		}
		a.say("%s: the background backup failed (%v): backing up again", m.Name, err)
	}
	if err := a.backupOne(ctx, m, foregroundWorkers()); err != nil {
		return fmt.Errorf("%s's data dir must be backed up before it is touched: %w", m.Name, err)
	}
	return nil
}

// gate is closed once: the survivor's etcd has loaded its data, or its start failed (then the
// background copies start anyway: they only waited to leave it the machine).
type gate struct {
	once sync.Once
	ch   chan struct{}
}

func newGate() *gate { return &gate{ch: make(chan struct{})} }

func (g *gate) open() { g.once.Do(func() { close(g.ch) }) }

// wait returns when the gate opens, or after limit.
func (g *gate) wait(limit time.Duration) {
	select {
	case <-g.ch:
	case <-time.After(limit):
	}
}

// watchSurvivorLoaded opens the gate once the survivor answers a status request (etcd serves
// client requests only after it has opened its db and rebuilt its index) or ctx ends.
func (a *Applier) watchSurvivorLoaded(ctx context.Context, m PlanMember) {
	defer a.survivorLoaded.open()
	cli, err := a.client(m.ClientURLs)
	if err != nil {
		return
	}
	defer cli.Close()
	for range 2400 { // 50 ms apart: two minutes at most
		sctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		_, err := cli.Status(sctx, m.ClientURLs[0])
		cancel()
		if err == nil || ctx.Err() != nil {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
}
