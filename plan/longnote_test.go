package plan

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Review finding 10: a step's error over 1 MiB, recorded whole as its failed note, made every
// later apply fail in OpenJournal ("token too long"): the plan could not be resumed without
// editing the journal by hand. Notes are cut short, and a long line an older etcdmedic wrote
// is read all the same.
func TestALongFailureNoteLeavesThePlanResumable(t *testing.T) {
	dir := t.TempDir()
	j, err := OpenJournal(dir)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if err := j.Record("backup", Started, "", now); err != nil {
		t.Fatal(err)
	}
	if err := j.Record("backup", Failed, strings.Repeat("é", 1<<20), now); err != nil { // 2 MiB
		t.Fatal(err)
	}
	if err := j.Record("backup", Finished, "1s", now); err != nil {
		t.Fatal(err)
	}
	// As an older etcdmedic wrote it: the whole note on one line of over 1 MiB.
	long := `{"step":"stop-all","event":"failed","at":"2026-12-01T03:00:00Z","note":"` + strings.Repeat("x", 2<<20) + `"}` + "\n"
	f, err := os.OpenFile(filepath.Join(dir, JournalFile), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(long + `{"step":"stop-all","event":"done","at":"2026-12-01T03:01:00Z"}` + "\n"); err != nil {
		t.Fatal(err)
	}
	f.Close()

	again, err := OpenJournal(dir)
	if err != nil {
		t.Fatalf("the journal cannot be read again: %v", err)
	}
	for _, step := range []string{"backup", "stop-all"} {
		if _, done := again.Done(step); !done {
			t.Errorf("%s is not seen done", step)
		}
	}
	b, err := os.ReadFile(filepath.Join(dir, JournalFile))
	if err != nil {
		t.Fatal(err)
	}
	if first, _, _ := strings.Cut(strings.SplitN(string(b), "\n", 3)[1], "\n"); len(first) > 2*maxNote || !strings.Contains(first, "bytes more") {
		t.Errorf("the failed note was recorded %d bytes long", len(first))
	}
}
