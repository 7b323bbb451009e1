package drill

import (
	"fmt"
	"html/template"
	"io"
	"math"
	"strconv"
	"strings"
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

// chart is one SVG chart over the drill's clock, in the page's pixel coordinates.
type chart struct {
	Title  string
	Frame  frame
	Outage *band
	Phases []phase
	XTicks []tick
	YTicks []tick
	Lines  []line
}

// frame is a chart's size and the edges of its plot area.
type frame struct{ Width, Height, Left, Right, Top, Bottom float64 }

var chartFrame = frame{Width: 960, Height: 250, Left: 70, Right: 945, Top: 44, Bottom: 220}

// band is the shaded write outage.
type band struct{ X, Y, Width, Height float64 }

// phase is one timeline event: a dashed line at X, numbered as in the timeline list.
type phase struct {
	N      int
	X      float64
	LabelY float64
	AtSec  float64
	What   string
}

// tick is one gridline of an axis at Pos (x or y in pixels).
type tick struct {
	Pos   float64
	Label string
}

// line is one series, in one or more polylines (a gap where it has no value).
type line struct {
	Name     string
	Class    string
	Segments []string
}

// scale maps values in [lo, hi] to pixels in [from, to], linearly or by log10.
type scale struct {
	lo, hi, from, to float64
	log              bool
}

func (s scale) at(v float64) float64 {
	lo, hi := s.lo, s.hi
	if s.log {
		v, lo, hi = math.Log10(max(v, s.lo)), math.Log10(lo), math.Log10(hi)
	}
	return round1(s.from + (v-lo)/(hi-lo)*(s.to-s.from))
}

func round1(v float64) float64 { return math.Round(v*10) / 10 }

// timeScaleOf spans the drill from its start to its last second, event or outage end.
func timeScaleOf(r *Result) scale {
	end := float64(r.Checked.Series[len(r.Checked.Series)-1].AtSec + 1)
	for _, e := range r.Timeline {
		end = max(end, e.AtSec)
	}
	end = max(end, r.Checked.WriteOutageUntil)
	return scale{lo: 0, hi: end, from: chartFrame.Left, to: chartFrame.Right}
}

func throughputChart(r *Result, x scale) chart {
	s := r.Checked.Series
	top := 0.0
	for _, b := range s {
		top = max(top, float64(b.Acked), float64(b.Failed+b.Indeterminate))
	}
	step := max(1, niceStep(top/4)) // operations come whole
	y := scale{lo: 0, hi: step * max(1, math.Ceil(top/step)), from: chartFrame.Bottom, to: chartFrame.Top}
	c := timeChart("Throughput (operations per second)", r, x)
	for i := 0.0; i*step <= y.hi; i++ {
		v := i * step
		c.YTicks = append(c.YTicks, tick{Pos: y.at(v), Label: number(v)})
	}
	c.Lines = []line{
		{Name: "acknowledged", Class: "acked", Segments: steps(s, x, y, ackedOf)},
		{Name: "failed + indeterminate", Class: "errors", Segments: steps(s, x, y, unackedOf)},
	}
	return c
}

func latencyChart(r *Result, x scale) chart {
	s := r.Checked.Series
	lo, hi := math.Inf(1), 0.0
	for _, b := range s {
		if b.Acked > 0 {
			lo, hi = min(lo, b.P50Ms, b.P99Ms), max(hi, b.P50Ms, b.P99Ms)
		}
	}
	y := logScaleOf(lo, hi)
	c := timeChart("Latency of acknowledged operations (ms, log scale)", r, x)
	for v := y.lo; v <= y.hi*1.001; v *= 10 {
		c.YTicks = append(c.YTicks, tick{Pos: y.at(v), Label: millis(v)})
	}
	c.Lines = []line{
		{Name: "p50", Class: "p50", Segments: steps(s, x, y, p50Of)},
		{Name: "p99", Class: "p99", Segments: steps(s, x, y, p99Of)},
	}
	return c
}

// What each line of the charts draws of a second; latency has no value when nothing was acked.
func ackedOf(b Second) (float64, bool)   { return float64(b.Acked), true }
func unackedOf(b Second) (float64, bool) { return float64(b.Failed + b.Indeterminate), true }
func p50Of(b Second) (float64, bool)     { return b.P50Ms, b.Acked > 0 }
func p99Of(b Second) (float64, bool)     { return b.P99Ms, b.Acked > 0 }

// logScaleOf spans whole decades around [lo, hi] milliseconds, at least 0.01 ms.
func logScaleOf(lo, hi float64) scale {
	if hi <= 0 || math.IsInf(lo, 1) {
		lo, hi = 1, 10
	}
	lo = math.Pow(10, math.Floor(math.Log10(max(lo, 0.01))))
	hi = max(math.Pow(10, math.Ceil(math.Log10(max(hi, 0.01)))), lo*10)
	return scale{lo: lo, hi: hi, from: chartFrame.Bottom, to: chartFrame.Top, log: true}
}

// timeChart is a chart with the drill's clock on x: its ticks, events and write outage.
func timeChart(title string, r *Result, x scale) chart {
	c := chart{Title: title, Frame: chartFrame}
	step := max(1, niceStep(x.hi/10))
	for i := 0.0; i*step <= x.hi; i++ {
		v := i * step
		c.XTicks = append(c.XTicks, tick{Pos: x.at(v), Label: number(v) + "s"})
	}
	for i, e := range r.Timeline {
		// Three rows of labels so the numbers of events close in time do not overlap.
		c.Phases = append(c.Phases, phase{N: i + 1, X: x.at(e.AtSec), LabelY: chartFrame.Top - 6 - float64(i%3)*12, AtSec: e.AtSec, What: e.What})
	}
	if ch := r.Checked; ch.WriteOutageSec > 0 {
		from, until := x.at(ch.WriteOutageFrom), x.at(ch.WriteOutageUntil)
		c.Outage = &band{X: from, Y: chartFrame.Top, Width: round1(until - from), Height: chartFrame.Bottom - chartFrame.Top}
	}
	return c
}

// steps draws value as a flat step across each second, as polylines broken where it has none.
func steps(s []Second, x, y scale, value func(Second) (float64, bool)) []string {
	var segments []string
	var points []string
	for _, b := range s {
		v, ok := value(b)
		if !ok {
			segments, points = appendSegment(segments, points), nil
			continue
		}
		t := float64(b.AtSec)
		points = append(points, fmt.Sprintf("%g,%g %g,%g", x.at(t), y.at(v), x.at(t+1), y.at(v)))
	}
	return appendSegment(segments, points)
}

func appendSegment(segments, points []string) []string {
	if len(points) == 0 {
		return segments
	}
	return append(segments, strings.Join(points, " "))
}

// niceStep is the smallest 1, 2 or 5 times a power of ten that is at least v (1 for v <= 0).
func niceStep(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= v*(1-1e-9) {
			return m * p
		}
	}
	return 10 * p
}

// millis labels a latency: "0.1 ms", "20 ms", "1 s".
func millis(ms float64) string {
	if ms >= 1000 {
		return number(ms/1000) + " s"
	}
	return number(ms) + " ms"
}

// number prints v without float noise: 0.6, not 0.6000000000000001.
func number(v float64) string {
	return strconv.FormatFloat(math.Round(v*1e6)/1e6, 'f', -1, 64)
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
<tr><th>Ledger writes</th><td>{{.Acked}} acknowledged, {{.Failed}} refused while broken, {{.Lost}} acknowledged then lost</td></tr>
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
