// Package plan carries out a list of steps so that it survives its own interruption: every
// step's start and completion is journaled (appended and fsynced) beside the plan, completed
// steps are skipped when the plan is applied again, and each step is written to be safe to
// run again when it was started but not recorded as done.
package plan

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"
	"unicode/utf8"

	"github.com/etcdmedic/etcdmedic/backup"
)

// Event kinds in the journal.
const (
	Started  = "start"
	Finished = "done"
	Failed   = "failed"
)

// Event is one journal line.
type Event struct {
	Step  string    `json:"step"`
	Event string    `json:"event"`
	At    time.Time `json:"at"`
	Note  string    `json:"note,omitempty"`
}

// Journal is the append-only record of a plan's progress (journal.jsonl beside plan.json).
type Journal struct {
	path   string
	events []Event
	// torn is true when the file ends inside a line (a crash while appending): the next
	// record starts on a line of its own.
	torn bool
}

// JournalFile is the journal's name in a plan folder.
const JournalFile = "journal.jsonl"

// OpenJournal reads the journal in dir (a missing one is empty). A last line cut short by a
// crash is ignored: the step it described is simply not recorded.
func OpenJournal(dir string) (*Journal, error) {
	j := &Journal{path: filepath.Join(dir, JournalFile)}
	f, err := os.Open(j.path)
	if errors.Is(err, fs.ErrNotExist) {
		return j, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	// Lines of any length: a journal an older etcdmedic wrote with a note over 1 MiB stays
	// readable (bufio.Scanner refused it for good, "token too long").
	r := bufio.NewReader(f)
	for {
		line, err := r.ReadBytes('\n')
		var e Event
		if len(line) > 0 && json.Unmarshal(line, &e) == nil {
			j.events = append(j.events, e)
		} // else a torn last line
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	if st, err := f.Stat(); err == nil && st.Size() > 0 {
		last := make([]byte, 1)
		if _, err := f.ReadAt(last, st.Size()-1); err == nil && last[0] != '\n' {
			j.torn = true
		}
	}
	return j, nil
}

// maxNote is the most of a note Record keeps: an error that lists many files or members, or
// wraps a large payload, is cut there, so that a journal line stays small.
const maxNote = 4 << 10

// shortNote is note cut to maxNote bytes (at a character boundary), saying so.
func shortNote(note string) string {
	if len(note) <= maxNote {
		return note
	}
	cut := maxNote
	for cut > 0 && !utf8.RuneStart(note[cut]) {
		cut--
	}
	return note[:cut] + fmt.Sprintf("... (%d bytes more)", len(note)-cut)
}

// Record appends one event and fsyncs it before returning.
func (j *Journal) Record(step, event, note string, at time.Time) error {
	e := Event{Step: step, Event: event, At: at.UTC(), Note: shortNote(note)}
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	_, statErr := os.Stat(j.path)
	created := errors.Is(statErr, fs.ErrNotExist)
	f, err := os.OpenFile(j.path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("open journal: %w", err)
	}
	line := append(b, '\n')
	if j.torn {
		line = append([]byte{'\n'}, line...)
	}
	if _, err := f.Write(line); err != nil {
		f.Close()
		return fmt.Errorf("write journal: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("sync journal: %w", err)
	}
	if created {
		// A new file's name survives a power cut only once its folder is synced.
		if err := backup.SyncDir(filepath.Dir(j.path)); err != nil {
			f.Close()
			return fmt.Errorf("sync the journal's folder: %w", err)
		}
	}
	j.events = append(j.events, e)
	j.torn = false
	return f.Close()
}

// Done reports whether step finished, and when.
func (j *Journal) Done(step string) (time.Time, bool) {
	for _, e := range j.events {
		if e.Step == step && e.Event == Finished {
			return e.At, true
		}
	}
	return time.Time{}, false
}

// StartedAt is when step last started.
func (j *Journal) StartedAt(step string) (time.Time, bool) {
	var at time.Time
	ok := false
	for _, e := range j.events {
		if e.Step == step && e.Event == Started {
			at, ok = e.At, true
		}
	}
	return at, ok
}

// Events returns every recorded event.
func (j *Journal) Events() []Event { return append([]Event(nil), j.events...) }

// Empty is true before any step started.
func (j *Journal) Empty() bool { return len(j.events) == 0 }
