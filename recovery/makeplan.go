package recovery

import (
	"context"
	"time"

	"github.com/etcdmedic/etcdmedic/runlock"
)

// MakePlanOptions are one `recover plan`: the members' data dirs, where the plan goes, and the
// operator's choices for the assessment and the plan.
type MakePlanOptions struct {
	PlanDir string
	Members []MemberInput
	Assess  AssessOptions
	Plan    PlanOptions
	Now     func() time.Time // time.Now when nil
}

// MakePlan assesses the members (stopping those still running on their data dirs), chooses
// the survivor and writes the plan into PlanDir, holding the run lock on the plan dir and every
// data dir throughout, so that no other run changes them meanwhile. A plan refused after the
// assessment discards the survivor backup the assessment took. The assessment is returned
// also with an error, to say which members it stopped.
func MakePlan(ctx context.Context, o MakePlanOptions) (*Plan, *Assessment, error) {
	// Before the lock, whose file goes beside the plan dir: into a member's folder, if the plan
	// dir lay inside one.
	given := make([]Candidate, len(o.Members))
	for i, m := range o.Members {
		given[i] = Candidate{Name: m.Name, DataDir: absolute(m.DataDir), WALDir: absolute(m.WALDir)}
	}
	if err := checkFolderOutsideMembers("--plan-dir", o.PlanDir, given); err != nil {
		return nil, nil, err
	}
	targets := []string{o.PlanDir}
	for _, m := range o.Members {
		targets = append(targets, m.DataDir)
	}
	release, err := runlock.AcquireAll(targets, "recover plan")
	if err != nil {
		return nil, nil, LockError{err}
	}
	defer release()
	a, err := Assess(ctx, o.Members, o.Assess)
	if err != nil {
		return nil, a, err
	}
	now := time.Now
	if o.Now != nil {
		now = o.Now
	}
	p, err := NewPlan(a, o.Plan, now())
	if err == nil {
		err = p.Save(o.PlanDir)
	}
	if err != nil {
		a.DiscardSurvivorBackup()
		return nil, a, err
	}
	return p, a, nil
}

// LockError is a run lock MakePlan could not take: another run holds it (runlock.HeldError
// inside), or the lock file could not be made. Nothing was looked at.
type LockError struct{ Err error }

func (e LockError) Error() string { return e.Err.Error() }
func (e LockError) Unwrap() error { return e.Err }
