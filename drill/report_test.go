package drill

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/etcdmedic/etcdmedic/workload"
)

// repaired is a drill that ran the workload: a write outage from t+4s to t+6.5s, and an event
// whose text tries to inject a script.
func repaired() *Result {
	return &Result{
		Drill: "quorum-loss", Incident: "2: quorum gone", Repair: "etcdmedic recover", RepairSec: 3.2, Passed: true, Acked: 120,
		Timeline: []Event{
			{AtSec: 1, What: "workload started"},
			{AtSec: 4, What: "member m2 wiped <script>alert(1)</script>"},
			{AtSec: 6.5, What: "recovered from m1"},
		},
		Checked: &Checked{
			Acked: 30, Failed: 2, Indeterminate: 1, Verdict: "passed", Passed: true,
			WriteOutageSec: 2.5, WriteOutageFrom: 4, WriteOutageUntil: 6.5,
			Series: []Second{
				{AtSec: 3, Acked: 10, P50Ms: 2, P99Ms: 9},
				{AtSec: 4, Failed: 2, Indeterminate: 1},
				{AtSec: 5},
				{AtSec: 6, Acked: 20, P50Ms: 3, P99Ms: 850},
			},
		},
	}
}

func TestWriteReport(t *testing.T) {
	tests := []struct {
		name    string
		results []*Result
		want    []string
		notWant []string
	}{
		{
			name:    "drill with workload: charts, phases, outage, escaped events",
			results: []*Result{repaired()},
			want: []string{
				"<svg", "<polyline", `class="outage"`, "Throughput", "Latency", "1 s", // 850 ms p99: a 1 s decade
				`<text class="phase"`, ">3</text>", "t+6.5s</span>recovered from m1",
				"t+4.0s: member m2 wiped &lt;script&gt;", "&lt;script&gt;alert(1)&lt;/script&gt;",
				"2.5 s without an acknowledged write (t+4.0s to t+6.5s)", "30 acknowledged", "1 indeterminate",
				`<span class="status passed">passed</span>`, "etcdmedic recover",
			},
			notWant: []string{"<script", "http://", "https://", "<link"},
		},
		{
			name:    "skipped drill: reason, no charts",
			results: []*Result{{Drill: "power-cut", Incident: "2 after a power cut", Skipped: "no FUSE on this machine"}},
			want:    []string{`<span class="status skipped">skipped</span>`, "no FUSE on this machine"},
			notWant: []string{"<svg", "<th>Repair</th><td>"},
		},
		{
			name:    "drill without workload: ledger only, no charts",
			results: []*Result{{Drill: "stale-volume", Acked: 50, Failed: 3, Timeline: []Event{{AtSec: 2, What: "volume reused"}}}},
			want:    []string{`<span class="status failed">failed</span>`, "50 acknowledged, 3 errored while broken (not acknowledged; may or may not have been applied)", "none recorded", "t+2.0s</span>volume reused"},
			notWant: []string{"<svg"},
		},
		{
			name:    "no drill",
			results: nil,
			want:    []string{"No drill ran."},
			notWant: []string{"<table"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var page bytes.Buffer
			if err := WriteReport(&page, tt.results); err != nil {
				t.Fatal(err)
			}
			for _, s := range tt.want {
				if !strings.Contains(page.String(), s) {
					t.Errorf("report lacks %q:\n%s", s, page.String())
				}
			}
			for _, s := range tt.notWant {
				if strings.Contains(page.String(), s) {
					t.Errorf("report holds %q:\n%s", s, page.String())
				}
			}
		})
	}
}

// TestReportGapsLatencyWhereNothingWasAcked: the latency lines break over the outage's seconds
// instead of drawing a false 0 ms; throughput stays one line that drops to zero.
func TestReportGapsLatencyWhereNothingWasAcked(t *testing.T) {
	r := repaired()
	c := viewOf(r).Charts
	if len(c) != 2 {
		t.Fatalf("got %d charts, want throughput and latency", len(c))
	}
	if got := len(c[0].Lines[0].Segments); got != 1 {
		t.Errorf("acked throughput in %d segments, want 1", got)
	}
	if got := len(c[1].Lines[1].Segments); got != 2 {
		t.Errorf("p99 latency in %d segments, want 2 (before and after the outage)", got)
	}
	if got := len(c[0].Phases); got != len(r.Timeline) {
		t.Errorf("%d phases marked, want one per timeline event (%d)", got, len(r.Timeline))
	}
}

func TestSeriesOf(t *testing.T) {
	start := time.Date(2026, 12, 1, 3, 0, 0, 0, time.UTC)
	at := func(sec float64) time.Time { return start.Add(time.Duration(sec * float64(time.Second))) }
	op := func(from, to float64, o workload.Outcome) workload.Op {
		return workload.Op{Kind: workload.Put, Start: at(from), End: at(to), Outcome: o}
	}
	h := &workload.History{
		Start: at(1.5), End: at(5.2),
		Ops: []workload.Op{
			op(1.50, 1.51, workload.OK),            // 10 ms, second 1
			op(1.60, 1.63, workload.OK),            // 30 ms, second 1
			op(1.70, 1.72, workload.OK),            // 20 ms, second 1
			op(1.80, 2.30, workload.Failed),        // second 2
			op(2.00, 4.00, workload.Indeterminate), // second 4: nothing ended in 3
			op(4.90, 5.10, workload.OK),            // 200 ms, second 5
		},
	}
	want := []Second{
		{AtSec: 1, Acked: 3, P50Ms: 20, P99Ms: 30},
		{AtSec: 2, Failed: 1},
		{AtSec: 3},
		{AtSec: 4, Indeterminate: 1},
		{AtSec: 5, Acked: 1, P50Ms: 200, P99Ms: 200},
	}
	got := seriesOf(h, start)
	for i := range got { // float milliseconds from time arithmetic: compare to the microsecond
		got[i].P50Ms, got[i].P99Ms = roundMicros(got[i].P50Ms), roundMicros(got[i].P99Ms)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("seriesOf:\n got %+v\nwant %+v", got, want)
	}
	if s := seriesOf(&workload.History{}, start); s != nil {
		t.Errorf("seriesOf an empty history = %+v, want nil", s)
	}
}

func roundMicros(ms float64) float64 { return float64(int64(ms*1000+0.5)) / 1000 }

func TestNiceStep(t *testing.T) {
	for _, tt := range []struct{ in, want float64 }{{0, 1}, {0.3, 0.5}, {1, 1}, {1.2, 2}, {3, 5}, {7, 10}, {45, 50}, {120, 200}} {
		if got := niceStep(tt.in); got != tt.want {
			t.Errorf("niceStep(%g) = %g, want %g", tt.in, got, tt.want)
		}
	}
}
