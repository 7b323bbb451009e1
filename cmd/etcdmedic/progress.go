package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
)

// progress reports a long-running command as it goes, on stderr, which leaves stdout to the
// command's result (one JSON document with -w json). With -w json each event is one JSON
// object on its own line, for a program to follow; with -w table it is a line for a person.
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
	asWritten                    // a library's own line of text, printed as it wrote it
)

func newProgress(format string, stderr io.Writer) *progress {
	return &progress{w: stderr, json: format == "json", now: time.Now}
}

// lines is an io.Writer for a library that reports its progress as lines of text (an Out
// field): each line it writes becomes one event of kind event.
func (p *progress) lines(event string) io.Writer { return &lineEvents{p: p, event: event} }

type lineEvents struct {
	p       *progress
	event   string
	mu      sync.Mutex
	partial []byte
}

func (l *lineEvents) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.partial = append(l.partial, b...)
	for {
		i := bytes.IndexByte(l.partial, '\n')
		if i < 0 {
			return len(b), nil
		}
		line := string(l.partial[:i])
		l.partial = l.partial[i+1:]
		if l.p.json {
			line = strings.TrimSpace(line)
			if line == "" {
				continue
			}
		}
		l.p.event(progressEvent{Event: l.event, Message: line, line: asWritten})
	}
}

// event reports e, stamped with the time; safe for concurrent use.
func (p *progress) event(e progressEvent) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.json {
		e.Time = p.now().UTC()
		enc := json.NewEncoder(p.w) // one Write per event: a whole line
		enc.SetEscapeHTML(false)    // "==> step 1/6" stays readable in a log
		enc.Encode(e)
		return
	}
	switch e.line {
	case headingLine:
		fmt.Fprintf(p.w, "==> %s\n", e.Message)
	case detailLine:
		fmt.Fprintf(p.w, "    %s\n", e.Message)
	case asWritten:
		fmt.Fprintf(p.w, "%s\n", e.Message)
	}
}

// progressOf is the progress writer of the running command, for a library's lines of text:
// as written with -w table, one JSON event a line (named after the command) with -w json.
func progressOf(cmd *cobra.Command) io.Writer {
	format, _ := cmd.Flags().GetString("write-out")
	event := strings.ReplaceAll(strings.TrimPrefix(cmd.CommandPath(), cmd.Root().Name()+" "), " ", "-")
	return newProgress(format, cmd.ErrOrStderr()).lines(event)
}
