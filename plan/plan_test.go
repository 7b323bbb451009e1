package plan

import (
	"context"
	"errors"
	"io"
	"io/fs"
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

// Review item 7: journal entries are keyed by step IDs, which repeat from plan to plan, so a
// new plan beside an old journal would have every step skipped as done. Save refuses a folder
// that holds a plan or a journal, writes nothing into it and leaves the journal as it was.
// Each row is what an operator may leave in the folder.
func TestSaveRefusesAFolderThatHoldsAPlanOrAJournal(t *testing.T) {
	type p struct{ Survivor string }
	journal := `{"step":"snapshot","event":"done","at":"2026-12-01T03:00:00Z"}` + "\n"
	for _, tc := range []struct {
		name  string
		files map[string]string // left in the folder before Save
		found string            // the artefact Save must name ("": Save writes the plan)
	}{
		{"a new folder", nil, ""},
		{"an empty folder", map[string]string{}, ""},
		{"a plan.json.tmp torn by a crash inside Save", map[string]string{File + ".tmp": `{"chec`}, ""},
		{"a plan not applied yet", map[string]string{File: `{}`}, File},
		{"the journal of an applied plan whose plan.json was deleted", map[string]string{JournalFile: journal}, JournalFile},
		{"an empty journal", map[string]string{JournalFile: ""}, JournalFile},
		{"a plan and its journal", map[string]string{File: `{}`, JournalFile: journal}, File},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "plan")
			if tc.files != nil {
				if err := os.Mkdir(dir, 0o700); err != nil {
					t.Fatal(err)
				}
			}
			for name, body := range tc.files {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			err := Save(dir, p{"m2"})
			if tc.found == "" {
				var got p
				if err != nil || Load(dir, &got) != nil || got.Survivor != "m2" {
					t.Fatalf("Save into %s: %v", tc.name, err)
				}
				return
			}
			var used *FolderUsedError
			if !errors.Is(err, ErrFolderUsed) || !errors.As(err, &used) || used.Found != tc.found || used.Dir != dir {
				t.Fatalf("Save beside %s: want a FolderUsedError naming %s, got %v", tc.name, tc.found, err)
			}
			if !strings.Contains(err.Error(), "a new --plan-dir") {
				t.Errorf("the refusal must say to use a new --plan-dir: %v", err)
			}
			for name, body := range tc.files {
				if b, err := os.ReadFile(filepath.Join(dir, name)); err != nil || string(b) != body {
					t.Errorf("%s changed by a refused Save: %q, %v", name, b, err)
				}
			}
			if _, ok := tc.files[File]; !ok {
				if _, err := os.Stat(filepath.Join(dir, File)); !errors.Is(err, fs.ErrNotExist) {
					t.Errorf("a refused Save wrote a plan: %v", err)
				}
			}
		})
	}
}
