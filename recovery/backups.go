package recovery

import (
	"fmt"
	goruntime "runtime"
)

// foregroundWorkers copy files in parallel when nothing else waits: one per CPU, up to 4.
func foregroundWorkers() int { return min(4, goruntime.NumCPU()) }

// Backups come first for the survivor, whose data the rebuild changes at once. The other
// members' data dirs stay untouched until their own rejoin step, so they are copied in the
// background while the survivor is rebuilt, and each rejoin waits for its member's verified
// backup before it moves anything. Runbook members whose data dir is not readable here are
// archived by the operator, at a checkpoint, up front.

// backupFirst backs up the survivor and every member the operator archives, then starts the
// background copies of the others.
func (a *Applier) backupFirst() error {
	var later []PlanMember
	for _, m := range a.Plan.Members {
		if m.Name == a.Plan.Survivor || m.Runbook != "" {
			if err := a.backupOne(m, foregroundWorkers()); err != nil {
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
	go func() {
		for i, m := range later {
			done[i] <- a.backupOne(m, 1) // one file at a time: the survivor is bootstrapping
		}
	}()
	if len(later) > 0 {
		a.say("backing up %d more data dirs in the background; each is verified before its member is touched", len(later))
	}
	return nil
}

// ensureBackup returns once m's backup is verified: the background copy when one runs (in this
// process), or a copy made now (after an interruption, or when verification failed).
func (a *Applier) ensureBackup(m PlanMember) error {
	if ch, ok := a.background[m.Name]; ok {
		delete(a.background, m.Name)
		err := <-ch
		if err == nil {
			return nil
		}
		a.say("%s: the background backup failed (%v): backing up again", m.Name, err)
	}
	if err := a.backupOne(m, foregroundWorkers()); err != nil {
		return fmt.Errorf("%s's data dir must be backed up before it is touched: %w", m.Name, err)
	}
	return nil
}
