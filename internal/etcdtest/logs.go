package etcdtest

import (
	"fmt"
	"io"
	"os"
	"strings"
)

// logTailBytes bounds how much of a log LogTail reads: a stalled learner writes thousands of
// lines a second.
const logTailBytes = 1 << 20

// readLogTail returns the last n lines of the file at path, or a note saying why it can't.
func readLogTail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	off := max(st.Size()-logTailBytes, 0)
	data, err := io.ReadAll(io.NewSectionReader(f, off, st.Size()-off))
	if err != nil {
		return fmt.Sprintf("(read log: %v)", err)
	}
	return tailLines(string(data), n)
}

func tailLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func indent(s string) string {
	return "    " + strings.ReplaceAll(s, "\n", "\n    ")
}
