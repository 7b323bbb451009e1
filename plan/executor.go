package plan

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"time"
)

// StepKind names what a step does. Each kind of plan declares its kinds as constants
// (recovery.StepStopAll, ...), the way raftpb declares its EntryTypes.
type StepKind string

// Step is one unit of a plan.
type Step struct {
	// ID is the step's key in the journal and in crash points: its kind, then ":" and the
	// member it acts on, when it acts on one.
	ID     string   `json:"id"`
	Kind   StepKind `json:"kind"`
	Member string   `json:"member,omitempty"`
	// Stage is the pass of a plan that goes over its members more than once (an upgrade's
	// hop) the step belongs to.
	Stage int    `json:"stage,omitempty"`
	Title string `json:"title"`
}

// NewStep is a step of kind acting on member ("" for a step on the whole cluster).
func NewStep(kind StepKind, member, title string) Step {
	return Step{ID: StepID(kind, member), Kind: kind, Member: member, Title: title}
}

// StepID is the journal key of a step of kind acting on member.
func StepID(kind StepKind, member string) string {
	if member == "" {
		return string(kind)
	}
	return string(kind) + ":" + member
}

// UnmarshalJSON also reads the steps of plans written before steps had a kind: their kind
// and member are read from the ID.
func (s *Step) UnmarshalJSON(b []byte) error {
	type plain Step
	if err := json.Unmarshal(b, (*plain)(s)); err != nil {
		return err
	}
	if s.Kind == "" {
		kind, member, _ := strings.Cut(s.ID, ":")
		s.Kind, s.Member = StepKind(kind), member
	}
	return nil
}

// Timing is how long one step took in this run.
type Timing struct {
	Step     string        `json:"step"`
	Skipped  bool          `json:"skipped"` // done in an earlier run
	Duration time.Duration `json:"durationNs"`
}

// Executor runs steps in order against a journal.
type Executor struct {
	Journal *Journal
	Out     io.Writer
	Now     func() time.Time
}

// Run runs every step not yet done, recording start and completion; it stops at the first
// error (recorded as failed) so that running again resumes there.
func (e *Executor) Run(ctx context.Context, steps []Step, do func(context.Context, Step) error) ([]Timing, error) {
	now := e.Now
	if now == nil {
		now = time.Now
	}
	var timings []Timing
	for i, s := range steps {
		if at, done := e.Journal.Done(s.ID); done {
			fmt.Fprintf(e.Out, "==> [%d/%d] %s: done at %s, skipping\n", i+1, len(steps), s.Title, at.Format(time.RFC3339))
			timings = append(timings, Timing{Step: s.ID, Skipped: true})
			continue
		}
		if err := ctx.Err(); err != nil {
			return timings, err
		}
		resumed := ""
		if _, started := e.Journal.StartedAt(s.ID); started {
			resumed = " (resuming: it was interrupted)"
		}
		fmt.Fprintf(e.Out, "==> [%d/%d] %s%s\n", i+1, len(steps), s.Title, resumed)
		if err := e.Journal.Record(s.ID, Started, "", now()); err != nil {
			return timings, err
		}
		Crashpoint(s.ID + ":start")
		began := now()
		if err := do(ctx, s); err != nil {
			e.Journal.Record(s.ID, Failed, err.Error(), now())
			return timings, fmt.Errorf("step %q: %w", s.Title, err)
		}
		took := now().Sub(began)
		if err := e.Journal.Record(s.ID, Finished, took.String(), now()); err != nil {
			return timings, err
		}
		timings = append(timings, Timing{Step: s.ID, Duration: took})
		Crashpoint(s.ID + ":done")
	}
	return timings, nil
}

// CrashpointEnv names a point at which the process kills itself (SIGKILL), for tests that
// prove a plan survives an interruption at every step boundary and inside long steps.
const CrashpointEnv = "ETCDMEDIC_CRASHPOINT"

// Crashpoint kills the process when name is the point named in $ETCDMEDIC_CRASHPOINT.
func Crashpoint(name string) {
	if want := os.Getenv(CrashpointEnv); want != "" && strings.EqualFold(want, name) {
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
		time.Sleep(time.Minute) // never returns
	}
}
