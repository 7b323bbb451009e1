package drill

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

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
