package sandbox

import (
	"os"
	"strings"
)

// lastLines is the last n lines of the file at path (at most its last 64 KiB), indented for an
// error message, or a note saying why there are none.
func lastLines(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return "    (" + err.Error() + ")"
	}
	defer f.Close()
	const most = 64 << 10
	st, err := f.Stat()
	if err != nil {
		return "    (" + err.Error() + ")"
	}
	from := max(st.Size()-most, 0)
	b := make([]byte, st.Size()-from)
	if _, err := f.ReadAt(b, from); err != nil {
		return "    (" + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "    " + strings.Join(lines, "\n    ")
}
