package main

import (
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"time"
)

// progress reports a long-running command as it goes. With -w json each event is one JSON
// object on its own line of stdout, for a program to follow; with -w table it is a line for
// a person on stderr, which leaves stdout to the result.
type progress struct {
	mu   sync.Mutex
	w    io.Writer
	json bool
	now  func() time.Time
}

// progressEvent is one event of a command's progress.
type progressEvent struct {
	Time    time.Time `json:"time"`
	Event   string    `json:"event"`
	Member  string    `json:"member"` // "": the cluster
	Step    string    `json:"step"`   // "": outside of a plan's steps
	Message string    `json:"message"`
	line    humanLine
}

// humanLine is how a person sees an event.
type humanLine int

const (
	detailLine  humanLine = iota // indented, under the step it belongs to
	headingLine                  // a step: "==> ..."
	noLine                       // for programs only: what the command prints at its end says it
)

func newProgress(format string, stdout, stderr io.Writer) *progress {
	if format == "json" {
		return &progress{w: stdout, json: true, now: time.Now}
	}
	return &progress{w: stderr, now: time.Now}
}

// event reports e, stamped with the time; safe for concurrent use.
func (p *progress) event(e progressEvent) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.json {
		e.Time = p.now().UTC()
		b, err := json.Marshal(e)
		if err != nil {
			return // strings and a time: cannot happen
		}
		p.w.Write(append(b, '\n'))
		return
	}
	switch e.line {
	case headingLine:
		fmt.Fprintf(p.w, "==> %s\n", e.Message)
	case detailLine:
		fmt.Fprintf(p.w, "    %s\n", e.Message)
	}
}
