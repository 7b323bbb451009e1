package main

import (
	"io"

	"github.com/etcdmedic/etcdmedic/member"
	"github.com/etcdmedic/etcdmedic/scan"
	"github.com/etcdmedic/etcdmedic/upgrade"
)

// printer renders each command's result; one implementation per -w format, as etcdutl does.
type printer interface {
	Version(w io.Writer, v versionInfo) error
	Inspect(w io.Writer, r inspectResult) error
	Sandbox(w io.Writer, r sandboxResult) error
	Doctor(w io.Writer, r doctorResult) error
	Guard(w io.Writer, r guardResult) error
	Scan(w io.Writer, r *scan.Result) error
	MemberChange(w io.Writer, r *member.Replaced) error
	MemberPromote(w io.Writer, r *member.Promoted) error
	MemberRemove(w io.Writer, r *member.Removed) error
	RecoverPlan(w io.Writer, r recoverPlanResult) error
	RecoverApply(w io.Writer, r recoverApplyResult) error
	Drill(w io.Writer, r drillResult) error
	UpgradeCheck(w io.Writer, r *upgrade.Report) error
	UpgradePlan(w io.Writer, p *upgrade.Plan) error
	UpgradeApply(w io.Writer, r upgradeApplyResult) error
	Backup(w io.Writer, r backupResult) error
	Restore(w io.Writer, r restoreResult) error
}

func printerFor(format string) (printer, error) {
	switch format {
	case "table", "":
		return tablePrinter{}, nil
	case "json":
		return jsonPrinter{}, nil
	}
	return nil, failf("use -w table or -w json", "unknown output format %q", format)
}
