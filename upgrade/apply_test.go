package upgrade

import (
	"slices"
	"testing"
	"time"

	"github.com/etcdmedic/etcdmedic/plan"
)

// journaled is a plan of two members in dir, whose journal already holds events.
func journaled(t *testing.T, record func(j *plan.Journal, at time.Time)) (*Applier, *[]Event) {
	t.Helper()
	dir := t.TempDir()
	j, err := plan.OpenJournal(dir)
	if err != nil {
		t.Fatal(err)
	}
	record(j, time.Date(2026, 12, 1, 3, 0, 0, 0, time.UTC))
	p := &Plan{Version: 1, From: "v3.5.24", Target: "v3.6.16",
		Members: []Member{{Name: "m1", DataDir: t.TempDir()}, {Name: "m2", DataDir: t.TempDir()}},
		Steps:   []plan.Step{plan.NewStep(StepSnapshot, "", "snapshot the cluster"), hopStep(0, "m1", "restart m1"), hopStep(0, "m2", "restart m2")}}
	var events []Event
	return &Applier{Plan: p, Dir: dir, Progress: func(e Event) { events = append(events, e) }}, &events
}

func kinds(events []Event) []EventKind {
	var out []EventKind
	for _, e := range events {
		out = append(out, e.Kind)
	}
	return out
}

// Run again on a plan whose every step is done, apply changes nothing and says so, step by step.
func TestApplyOfAFinishedPlanSkipsEveryStep(t *testing.T) {
	a, events := journaled(t, func(j *plan.Journal, at time.Time) {
		for _, s := range []string{"snapshot", hopStepID(0, "m1"), hopStepID(0, "m2")} {
			j.Record(s, plan.Started, "", at)
			j.Record(s, plan.Finished, "1s", at)
		}
	})
	res, err := a.Apply(t.Context())
	if err != nil || !res.Upgraded || res.Target != "v3.6.16" || len(res.Timings) != 3 || !res.Timings[2].Skipped {
		t.Fatalf("%+v, %v", res, err)
	}
	if got := kinds(*events); !slices.Equal(got, []EventKind{StepSkipped, StepSkipped, StepSkipped}) || (*events)[2].Member != "m2" {
		t.Fatalf("events %+v", *events)
	}
}

// A step the journal shows started but not done is announced as resumed, with its member; a
// step that fails is reported as failed, and the run's result says nothing was upgraded.
func TestApplyReportsAResumedStepAndItsFailure(t *testing.T) {
	a, events := journaled(t, func(j *plan.Journal, at time.Time) {
		j.Record("snapshot", plan.Started, "", at)
		j.Record("snapshot", plan.Finished, "1s", at)
		j.Record(hopStepID(0, "m1"), plan.Started, "", at) // the power went here
	})
	// The plan has no hop 0: the step fails before it touches anything.
	res, err := a.Apply(t.Context())
	if err == nil || res.Upgraded || len(res.Timings) != 1 || !res.Timings[0].Skipped {
		t.Fatalf("%+v, %v", res, err)
	}
	want := []EventKind{StepSkipped, StepStarted, StepFailed}
	if got := kinds(*events); !slices.Equal(got, want) {
		t.Fatalf("events %v, want %v", got, want)
	}
	started := (*events)[1]
	if started.Member != "m1" || started.Step != "hop0:m1" || started.Message != "[2/3] restart m1 (resuming: it was interrupted)" {
		t.Errorf("step started: %+v", started)
	}
}
