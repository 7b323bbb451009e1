package main

import (
	"bytes"
	"fmt"
	"testing"
	"time"
)

// Progress goes to stderr, stdout is the result's. -w json: one JSON object a line, stamped;
// -w table: headings and details for a person, and nothing of what only programs need.
func TestProgressLines(t *testing.T) {
	var errOut bytes.Buffer
	p := newProgress("json", &errOut)
	p.now = func() time.Time { return time.Date(2026, 12, 1, 3, 0, 0, 0, time.UTC) }
	p.event(progressEvent{Event: "leader-moved", Member: "m1", Step: "hop0:m1", Message: "leadership moved from m1 to m2"})
	p.event(progressEvent{Event: "step-finished", Message: "[1/3] done in 1s", line: noLine})
	want := `{"time":"2026-12-01T03:00:00Z","event":"leader-moved","member":"m1","step":"hop0:m1","message":"leadership moved from m1 to m2"}
{"time":"2026-12-01T03:00:00Z","event":"step-finished","member":"","step":"","message":"[1/3] done in 1s"}
`
	if errOut.String() != want {
		t.Errorf("-w json:\n%s\nwant:\n%s", errOut.String(), want)
	}

	errOut.Reset()
	p = newProgress("table", &errOut)
	p.event(progressEvent{Event: "step-started", Message: "[2/3] restart m1", line: headingLine})
	p.event(progressEvent{Event: "leader-moved", Message: "leadership moved from m1 to m2"})
	p.event(progressEvent{Event: "step-finished", Message: "[2/3] done in 1s", line: noLine})
	if want := "==> [2/3] restart m1\n    leadership moved from m1 to m2\n"; errOut.String() != want {
		t.Errorf("-w table: stderr %q, want %q", errOut.String(), want)
	}
}

// A library's lines of text (its Out) become one event each; as text they pass unchanged.
func TestProgressOfALibrarysLines(t *testing.T) {
	var errOut bytes.Buffer
	p := newProgress("json", &errOut)
	p.now = func() time.Time { return time.Date(2026, 12, 1, 3, 0, 0, 0, time.UTC) }
	w := p.lines("recover")
	fmt.Fprintf(w, "==> [1/7] stop every member\n    m1 stop")
	fmt.Fprintf(w, "ped\n\n")
	want := `{"time":"2026-12-01T03:00:00Z","event":"recover","member":"","step":"","message":"==> [1/7] stop every member"}
{"time":"2026-12-01T03:00:00Z","event":"recover","member":"","step":"","message":"m1 stopped"}
`
	if errOut.String() != want {
		t.Errorf("-w json:\n%s\nwant:\n%s", errOut.String(), want)
	}
	errOut.Reset()
	w = newProgress("table", &errOut).lines("recover")
	fmt.Fprintf(w, "==> [1/7] stop every member\n    m1 stopped\n")
	if want := "==> [1/7] stop every member\n    m1 stopped\n"; errOut.String() != want {
		t.Errorf("-w table: %q, want %q", errOut.String(), want)
	}
}
