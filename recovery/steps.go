package recovery

import "github.com/etcdmedic/etcdmedic/plan"

// The kinds of step a recovery plan is made of, in the order a plan runs them.
const (
	StepStopAll         plan.StepKind = "stop-all"          // stop every member, proven down
	StepBackup          plan.StepKind = "backup"            // back up every data dir, verified
	StepForceNewCluster plan.StepKind = "force-new-cluster" // the survivor alone, its log kept
	StepRestoreSnapshot plan.StepKind = "restore-snapshot"  // the survivor rebuilt from a snapshot
	StepRemoveLeftovers plan.StepKind = "remove-leftovers"  // members the forced start left behind
	StepRestartClean    plan.StepKind = "restart-clean"     // the survivor's first run alone (forced, or short), restarted as itself
	StepRejoin          plan.StepKind = "rejoin"            // one member: quarantined, added as a learner, promoted
	StepVerify          plan.StepKind = "verify"            // every member up, hashes equal
)
