package drill

import (
	"fmt"
	"html/template"
	"io"
)

// reportTemplate is parsed once; html/template escapes every text a drill recorded.
var reportTemplate = template.Must(template.New("report").Parse(reportHTML))

// WriteReport writes one self-contained HTML page for results: per drill its outcome, its
// timeline, and charts of the workload's throughput and latency second by second with the
// timeline's events and the write outage marked. The page needs no network and no JavaScript.
func WriteReport(w io.Writer, results []*Result) error {
	var drills []drillView
	for _, r := range results {
		if r != nil {
			drills = append(drills, viewOf(r))
		}
	}
	if err := reportTemplate.Execute(w, drills); err != nil {
		return fmt.Errorf("write the drill report: %w", err)
	}
	return nil
}

// drillView is one drill as the report shows it.
type drillView struct {
	*Result
	Status string // passed, failed or skipped
	Charts []chart
}

func viewOf(r *Result) drillView {
	v := drillView{Result: r, Status: statusOf(r)}
	if r.Checked != nil && len(r.Checked.Series) > 0 {
		x := timeScaleOf(r)
		v.Charts = []chart{throughputChart(r, x), latencyChart(r, x)}
	}
	return v
}

func statusOf(r *Result) string {
	switch {
	case r.Skipped != "":
		return "skipped"
	case r.Passed:
		return "passed"
	}
	return "failed"
}

// reportHTML is the page: inline CSS and SVG only, so it opens offline and from a ticket.
const reportHTML = `<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>etcdmedic drill report</title>
<style>
body{font:14px/1.4 system-ui,sans-serif;color:#222;max-width:1000px;margin:2em auto;padding:0 1em}
h2{margin-top:2em;padding-top:1em;border-top:1px solid #ccc}
table{border-collapse:collapse}th,td{padding:2px 10px 2px 0;text-align:left;vertical-align:top}
.summary th,.summary td{border-bottom:1px solid #eee;padding-right:16px}
.status{color:#fff;font-weight:bold;padding:1px 6px;border-radius:3px}
.passed{background:#1b7f3b}.failed{background:#c0392b}.skipped{background:#888}
figure{margin:1.5em 0}figcaption{font-weight:bold}.key{font-weight:normal;margin-left:1em}
.key span{margin-right:1.2em}svg{display:block;width:100%;height:auto}
svg text{font-size:11px;fill:#555}.grid{stroke:#eee}.axis{stroke:#999}
.outage{fill:#f4c2c2;color:#d77}.phase{stroke:#7a5cc7;color:#7a5cc7;stroke-dasharray:3 3}
svg text.phase{fill:#7a5cc7;stroke:none;font-weight:bold}
polyline{fill:none;stroke-width:1.8}
.acked{stroke:#1b7f3b;color:#1b7f3b}.errors{stroke:#c0392b;color:#c0392b}
.p50{stroke:#2c6fbb;color:#2c6fbb}.p99{stroke:#e08a00;color:#e08a00}
.timeline{font:12px/1.5 ui-monospace,monospace}.at{display:inline-block;min-width:6.5em;color:#666}
</style></head><body>
<h1>etcdmedic drill report</h1>
{{- if not .}}<p>No drill ran.</p>{{end}}
{{- with .}}
<table class="summary"><tr><th>Drill</th><th>Result</th><th>Repair</th><th>Write outage</th><th>Checker verdict</th></tr>
{{- range .}}
<tr><td><a href="#drill-{{.Drill}}">{{.Drill}}</a></td><td><span class="status {{.Status}}">{{.Status}}</span></td>
<td>{{if not .Skipped}}{{printf "%.1f" .RepairSec}} s{{end}}</td>
<td>{{with .Checked}}{{printf "%.1f" .WriteOutageSec}} s{{end}}</td><td>{{with .Checked}}{{.Verdict}}{{end}}</td></tr>
{{- end}}
</table>
{{- end}}
{{- range .}}{{template "drill" .}}{{end}}
</body></html>
{{- define "drill"}}
<section id="drill-{{.Drill}}">
<h2>{{.Drill}} <span class="status {{.Status}}">{{.Status}}</span></h2>
<table>
<tr><th>Incident</th><td>{{.Incident}}</td></tr>
{{- if .Skipped}}
<tr><th>Skipped</th><td>{{.Skipped}}</td></tr>
{{- else}}
<tr><th>Repair</th><td>{{printf "%.1f" .RepairSec}} s{{if .Repair}}: {{.Repair}}{{end}}</td></tr>
{{- if or .Acked .Failed .Lost}}
<tr><th>Ledger writes</th><td>{{.Acked}} acknowledged, {{.Failed}} errored while broken (not acknowledged; may or may not have been applied), {{.Lost}} acknowledged then lost</td></tr>
{{- end}}
{{- with .Checked}}
<tr><th>Workload operations</th><td>{{.Acked}} acknowledged ({{printf "%.0f" .OpsPerSec}}/s), {{.Failed}} failed, {{.Indeterminate}} indeterminate; {{.WatchEvents}} watch events</td></tr>
<tr><th>Write outage</th><td>{{printf "%.1f" .WriteOutageSec}} s without an acknowledged write
{{- if .WriteOutageSec}} (t+{{printf "%.1f" .WriteOutageFrom}}s to t+{{printf "%.1f" .WriteOutageUntil}}s){{end}}</td></tr>
<tr><th>Checker verdict</th><td>{{.Verdict}}</td></tr>
{{- else}}
<tr><th>Workload</th><td>none recorded: no history to check or chart</td></tr>
{{- end}}
{{- end}}
{{- if .Dir}}
<tr><th>Directory</th><td><code>{{.Dir}}</code></td></tr>
{{- end}}
</table>
{{- range .Charts}}{{template "chart" .}}{{end}}
{{- if .Timeline}}
<h3>Timeline</h3>
<ol class="timeline">
{{- range .Timeline}}
<li><span class="at">t+{{printf "%.1f" .AtSec}}s</span>{{.What}}</li>
{{- end}}
</ol>
{{- end}}
</section>
{{end}}
{{- define "chart"}}
<figure><figcaption>{{.Title}}<span class="key">
{{- range .Lines}}<span class="{{.Class}}">&#9473; {{.Name}}</span>{{end}}
{{- if .Outage}}<span class="outage">&#9608; write outage</span>{{end}}
<span class="phase">&#9482; timeline event, numbered as in the timeline</span></span></figcaption>
<svg viewBox="0 0 {{.Frame.Width}} {{.Frame.Height}}" role="img" aria-label="{{.Title}}">
{{- with .Outage}}
<rect class="outage" x="{{.X}}" y="{{.Y}}" width="{{.Width}}" height="{{.Height}}"><title>write outage</title></rect>
{{- end}}
{{- range .YTicks}}
<line class="grid" x1="{{$.Frame.Left}}" x2="{{$.Frame.Right}}" y1="{{.Pos}}" y2="{{.Pos}}"/><text x="{{$.Frame.Left}}" y="{{.Pos}}" dx="-6" dy="4" text-anchor="end">{{.Label}}</text>
{{- end}}
{{- range .XTicks}}
<line class="grid" x1="{{.Pos}}" x2="{{.Pos}}" y1="{{$.Frame.Top}}" y2="{{$.Frame.Bottom}}"/><text x="{{.Pos}}" y="{{$.Frame.Bottom}}" dy="15" text-anchor="middle">{{.Label}}</text>
{{- end}}
<line class="axis" x1="{{.Frame.Left}}" x2="{{.Frame.Right}}" y1="{{.Frame.Bottom}}" y2="{{.Frame.Bottom}}"/>
<line class="axis" x1="{{.Frame.Left}}" x2="{{.Frame.Left}}" y1="{{.Frame.Top}}" y2="{{.Frame.Bottom}}"/>
{{- range .Lines}}{{$line := .}}
{{- range .Segments}}
<polyline class="{{$line.Class}}" points="{{.}}"><title>{{$line.Name}}</title></polyline>
{{- end}}
{{- end}}
{{- range .Phases}}
<g><title>t+{{printf "%.1f" .AtSec}}s: {{.What}}</title><line class="phase" x1="{{.X}}" x2="{{.X}}" y1="{{.LabelY}}" y2="{{$.Frame.Bottom}}"/><text class="phase" x="{{.X}}" y="{{.LabelY}}" dy="-2" text-anchor="middle">{{.N}}</text></g>
{{- end}}
</svg></figure>
{{end}}
`
