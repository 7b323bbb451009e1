package main

import (
	"encoding/json"
	"io"

	"github.com/etcdmedic/etcdmedic/member"
	"github.com/etcdmedic/etcdmedic/scan"
	"github.com/etcdmedic/etcdmedic/upgrade"
)

// jsonPrinter writes every result as indented JSON: the documented, machine-readable form.
type jsonPrinter struct{}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func (jsonPrinter) Version(w io.Writer, v versionInfo) error { return writeJSON(w, v) }

func (jsonPrinter) Backup(w io.Writer, r backupResult) error { return writeJSON(w, r) }

func (jsonPrinter) Restore(w io.Writer, r restoreResult) error { return writeJSON(w, r) }

func (jsonPrinter) Inspect(w io.Writer, r inspectResult) error { return writeJSON(w, r) }

func (jsonPrinter) Sandbox(w io.Writer, r sandboxResult) error { return writeJSON(w, r) }

func (jsonPrinter) Doctor(w io.Writer, r doctorResult) error { return writeJSON(w, r) }

func (jsonPrinter) Guard(w io.Writer, r guardResult) error { return writeJSON(w, r) }

func (jsonPrinter) Scan(w io.Writer, r *scan.Result) error { return writeJSON(w, r) }

func (jsonPrinter) MemberChange(w io.Writer, r *member.Replaced) error { return writeJSON(w, r) }

func (jsonPrinter) MemberPromote(w io.Writer, r *member.Promoted) error { return writeJSON(w, r) }

func (jsonPrinter) MemberRemove(w io.Writer, r *member.Removed) error { return writeJSON(w, r) }

func (jsonPrinter) RecoverPlan(w io.Writer, r recoverPlanResult) error { return writeJSON(w, r) }

func (jsonPrinter) RecoverApply(w io.Writer, r recoverApplyResult) error { return writeJSON(w, r) }

func (jsonPrinter) Drill(w io.Writer, r drillResult) error { return writeJSON(w, r) }

func (jsonPrinter) UpgradeCheck(w io.Writer, r *upgrade.Report) error { return writeJSON(w, r) }

func (jsonPrinter) UpgradePlan(w io.Writer, p *upgrade.Plan) error { return writeJSON(w, p) }

func (jsonPrinter) UpgradeApply(w io.Writer, r upgradeApplyResult) error { return writeJSON(w, r) }
