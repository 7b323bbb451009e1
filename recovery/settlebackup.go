package recovery

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/etcdmedic/etcdmedic/backup"
	"github.com/etcdmedic/etcdmedic/plan"
)

// backUpWhileSettling starts the survivor's backup when Assess stopped members and was given a
// backup folder: the watch for a supervisor lasts its 2 s whatever is done meanwhile, and the
// survivor's backup (the step apply must take before it changes anything) fits in it, so that
// apply can go straight to the rebuild. The returned keep waits for the copy, then runs
// settled (the watch's end: every stopped member must still be stopped, checked after the copy
// so that no process can have changed the data while it was copied), and keeps the copy only
// when settled passes. Otherwise the copy is removed (it is ours; the data dir is untouched).
// keep returns settled's error; a failed copy is only a warning (apply takes the backup then).
//
// The copy starts before the survivor is chosen, of the candidate ranked first (or the one the
// operator named): its whole read, which decides, runs meanwhile. keep discards the copy when
// another member was chosen.
func (a *Assessment) backUpWhileSettling(stopped stoppedByPlan, o AssessOptions) (keep func(settled func() error) error) {
	passThrough := func(settled func() error) error { return settled() }
	if len(stopped.index) == 0 || o.BackupDir == "" || o.FromSnapshot {
		return passThrough
	}
	s := a.find(o.Survivor)
	if ranked := rank(a.Candidates); s == nil && len(ranked) > 0 {
		s = a.find(ranked[0].Name)
	}
	if s == nil {
		return passThrough
	}
	dir, err := filepath.Abs(o.BackupDir)
	if err != nil || s.Running || dataDirPresent(s.RealDataDir) != nil || checkFreshBackupDir(dir) != nil {
		return passThrough // NewPlan says what is wrong with the folder
	}
	final := filepath.Join(dir, s.Name)
	m := PlanMember{Name: s.Name, DataDir: s.RealDataDir, WALDir: s.WALDir, Manifest: o.Manifests[s.Name]}
	done := make(chan error, 1)
	go func() {
		if err := backup.MkdirAllSynced(dir); err != nil {
			done <- err
			return
		}
		// keep always waits for this copy and removes it unless it stands: no cancellation.
		_, err := copyMember(context.Background(), m, final+".partial", foregroundWorkers())
		plan.Crashpoint("plan:backup:copied")
		done <- err
	}()
	return func(settledCheck func() error) error {
		err := <-done
		settled := settledCheck()
		if a.Survivor != s.Name && err == nil && settled == nil {
			os.RemoveAll(final + ".partial") // another member was chosen: apply backs it up
			return nil
		}
		if settled == nil && err == nil {
			if err = os.Rename(final+".partial", final); err == nil {
				err = backup.SyncDir(dir)
			}
		}
		if settled != nil || err != nil {
			os.RemoveAll(final + ".partial")
			if settled == nil {
				a.Warnings = append(a.Warnings, fmt.Sprintf("%s's backup, taken while plan watched the members it stopped, failed (%v): apply takes it", s.Name, err))
			}
			return settled
		}
		a.SurvivorBackup = final
		return nil
	}
}

// DiscardSurvivorBackup removes the backup plan took when no plan comes of the assessment
// (it is a copy of a data dir that stays as it is).
func (a *Assessment) DiscardSurvivorBackup() {
	if a != nil && a.SurvivorBackup != "" {
		os.RemoveAll(a.SurvivorBackup)
		a.SurvivorBackup = ""
	}
}
