package main

import (
	"bytes"
	"testing"
	"time"
)

// -w json: one JSON object a line, stamped; -w table: headings and details for a person, and
// nothing of what only programs need.
func TestProgressLines(t *testing.T) {
	var out, errOut bytes.Buffer
	p := newProgress("json", &out, &errOut)
	p.now = func() time.Time { return time.Date(2026, 12, 1, 3, 0, 0, 0, time.UTC) }
	p.event(progressEvent{Event: "leader-moved", Member: "m1", Step: "hop0:m1", Message: "leadership moved from m1 to m2"})
	p.event(progressEvent{Event: "step-finished", Message: "[1/3] done in 1s", line: noLine})
	want := `{"time":"2026-12-01T03:00:00Z","event":"leader-moved","member":"m1","step":"hop0:m1","message":"leadership moved from m1 to m2"}
{"time":"2026-12-01T03:00:00Z","event":"step-finished","member":"","step":"","message":"[1/3] done in 1s"}
`
	if out.String() != want || errOut.Len() != 0 {
		t.Errorf("-w json:\n%s\nwant:\n%s\nstderr: %q", out.String(), want, errOut.String())
	}

	out.Reset()
	p = newProgress("table", &out, &errOut)
	p.event(progressEvent{Event: "step-started", Message: "[2/3] restart m1", line: headingLine})
	p.event(progressEvent{Event: "leader-moved", Message: "leadership moved from m1 to m2"})
	p.event(progressEvent{Event: "step-finished", Message: "[2/3] done in 1s", line: noLine})
	if want := "==> [2/3] restart m1\n    leadership moved from m1 to m2\n"; errOut.String() != want || out.Len() != 0 {
		t.Errorf("-w table: stderr %q, want %q; stdout %q", errOut.String(), want, out.String())
	}
}
