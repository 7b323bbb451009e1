package plan

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestPlanFileRefusesEditsAndOverwrites(t *testing.T) {
	dir := t.TempDir()
	type p struct{ Survivor string }
	if err := Save(dir, p{"m1"}); err != nil {
		t.Fatal(err)
	}
	if err := Save(dir, p{"m2"}); err == nil {
		t.Fatal("a plan must never be replaced")
	}
	var got p
	if err := Load(dir, &got); err != nil || got.Survivor != "m1" {
		t.Fatalf("%v %+v", err, got)
	}
	b, _ := os.ReadFile(filepath.Join(dir, File))
	os.WriteFile(filepath.Join(dir, File), []byte(strings.Replace(string(b), "m1", "m3", 1)), 0o600)
	if err := Load(dir, &got); !errors.Is(err, ErrEdited) {
		t.Fatalf("an edited plan: %v", err)
	}
	if err := Load(t.TempDir(), &got); !IsMissing(err) {
		t.Fatalf("a missing plan: %v", err)
	}
}

// A run interrupted after a step started resumes there; done steps are skipped; a torn last
// journal line (a crash while writing it) is ignored.
func TestExecutorResumes(t *testing.T) {
	dir := t.TempDir()
	j, _ := OpenJournal(dir)
	steps := []Step{{ID: "a", Title: "a"}, {ID: "b", Title: "b"}, {ID: "c", Title: "c"}}
	var ran []string
	fail := errors.New("interrupted")
	_, err := (&Executor{Journal: j, Out: io.Discard}).Run(context.Background(), steps, func(_ context.Context, s Step) error {
		ran = append(ran, s.ID)
		if s.ID == "b" {
			return fail
		}
		return nil
	})
	if !errors.Is(err, fail) {
		t.Fatal(err)
	}
	f, _ := os.OpenFile(filepath.Join(dir, JournalFile), os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"step":"c","ev`)
	f.Close()
	j, err = OpenJournal(dir)
	if err != nil {
		t.Fatal(err)
	}
	timings, err := (&Executor{Journal: j, Out: io.Discard, Now: time.Now}).Run(context.Background(), steps, func(_ context.Context, s Step) error {
		ran = append(ran, s.ID)
		return nil
	})
	if err != nil || strings.Join(ran, ",") != "a,b,b,c" || !timings[0].Skipped {
		t.Fatalf("ran %v, timings %+v, %v", ran, timings, err)
	}
	j, _ = OpenJournal(dir)
	if _, done := j.Done("c"); !done {
		t.Fatal("the record after a torn line was lost")
	}
}
