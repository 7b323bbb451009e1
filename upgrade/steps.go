package upgrade

import (
	"fmt"

	"github.com/etcdmedic/etcdmedic/plan"
)

// The kinds of step an upgrade (or downgrade) plan is made of.
const (
	StepSnapshot        plan.StepKind = "snapshot"         // the cluster saved, checksummed
	StepDowngradeEnable plan.StepKind = "downgrade-enable" // etcd's downgrade job enabled, storage version dropped
	StepHop             plan.StepKind = "hop"              // one member restarted on one hop's version
	StepCheck           plan.StepKind = "check"            // after a hop: every member up, no drift
)

// hopStep restarts member name in hop h; its ID ("hop0:m1") is the journal's key.
func hopStep(h int, name, title string) plan.Step {
	return plan.Step{ID: hopStepID(h, name), Kind: StepHop, Member: name, Stage: h, Title: title}
}

func hopStepID(h int, name string) string { return fmt.Sprintf("hop%d:%s", h, name) }

// checkStep checks the cluster after hop h.
func checkStep(h int, title string) plan.Step {
	return plan.Step{ID: fmt.Sprintf("check%d", h), Kind: StepCheck, Stage: h, Title: title}
}

// typed gives the steps of a plan written before steps had kinds their kind, member and hop,
// read from their IDs.
func typed(s plan.Step) plan.Step {
	if h, name, ok := stepParts(s.ID); ok {
		return hopStep(h, name, s.Title)
	}
	var h int
	if _, err := fmt.Sscanf(s.ID, "check%d", &h); err == nil {
		return checkStep(h, s.Title)
	}
	return s
}
