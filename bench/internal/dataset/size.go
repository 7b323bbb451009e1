// Package dataset builds the etcd data a benchmark measures on: sizes as people write them,
// values written until a db reaches a size, and free loopback ports for the members.
package dataset

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"
)

// ParseSizes reads a comma-separated list of sizes.
func ParseSizes(s string) ([]int64, error) {
	var sizes []int64
	for _, f := range strings.Split(s, ",") {
		n, err := ParseSize(strings.TrimSpace(f))
		if err != nil {
			return nil, err
		}
		sizes = append(sizes, n)
	}
	return sizes, nil
}

// ParseSize reads 64MiB, 1GiB, 100KiB or a plain byte count.
func ParseSize(s string) (int64, error) {
	units := []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"B", 1}}
	num, mult := s, int64(1)
	for _, u := range units {
		if strings.HasSuffix(s, u.suffix) {
			num, mult = strings.TrimSuffix(s, u.suffix), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("size %q: want a positive count with an optional KiB, MiB or GiB suffix", s)
	}
	return n * mult, nil
}

// FormatSize writes a size the way ParseSize reads it, in the largest unit that divides it.
func FormatSize(n int64) string {
	switch {
	case n%(1<<30) == 0:
		return fmt.Sprintf("%dGiB", n>>30)
	case n%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", n>>20)
	case n%(1<<10) == 0:
		return fmt.Sprintf("%dKiB", n>>10)
	}
	return fmt.Sprintf("%dB", n)
}

// FreePorts returns n distinct ports on 127.0.0.1 that were free a moment ago.
func FreePorts(n int) ([]int, error) {
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("find a free port on 127.0.0.1: %w", err)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// Logger prints timestamped progress lines to stderr under a benchmark's name.
type Logger string

// Printf logs one line.
func (l Logger) Printf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s %s: %s\n", time.Now().Format("15:04:05"), string(l), fmt.Sprintf(format, args...))
}
