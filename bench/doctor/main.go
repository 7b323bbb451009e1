// Command doctor-bench measures how long `etcdmedic doctor` takes against `etcdctl endpoint
// status` and `endpoint health` (with and without --cluster) on a 5-member cluster with 0 to 3
// dead members, as a ratio of the command timeout, and whether each still shows the live
// members when quorum is lost.
//
//	go run ./bench/doctor [-etcd v3.6.4] [-timeout 2s] [-runs 3]
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/etcdmedic/etcdmedic/internal/etcdbin"
	"github.com/etcdmedic/etcdmedic/sandbox"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "doctor-bench:", err)
		os.Exit(1)
	}
}

type tool struct {
	name string
	args func(all []string, live string) []string
	bin  string
}

func run() error {
	version := flag.String("etcd", "v3.6.4", "etcd and etcdctl version")
	timeout := flag.Duration("timeout", 2*time.Second, "--command-timeout (and --dial-timeout) for every tool")
	runs := flag.Int("runs", 3, "runs per tool and scenario")
	flag.Parse()
	ctx := context.Background()
	etcd, err := etcdbin.Path(ctx, *version)
	if err != nil {
		return err
	}
	etcdctl, err := etcdbin.EtcdctlPath(ctx, *version)
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "doctor-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	etcdmedic := filepath.Join(tmp, "etcdmedic")
	if out, err := exec.Command("go", "build", "-o", etcdmedic, "./cmd/etcdmedic").CombinedOutput(); err != nil {
		return fmt.Errorf("build etcdmedic: %v\n%s", err, out)
	}
	t := timeout.String()
	tools := []tool{
		{"etcdmedic doctor", func(all []string, _ string) []string {
			return []string{"doctor", "-w", "json", "--endpoints", strings.Join(all, ","), "--command-timeout", t, "--dial-timeout", t}
		}, etcdmedic},
		{"etcdctl endpoint status", func(all []string, _ string) []string {
			return []string{"endpoint", "status", "-w", "json", "--endpoints", strings.Join(all, ","), "--command-timeout", t, "--dial-timeout", t}
		}, etcdctl},
		{"etcdctl endpoint status --cluster", func(_ []string, live string) []string {
			return []string{"endpoint", "status", "-w", "json", "--cluster", "--endpoints", live, "--command-timeout", t, "--dial-timeout", t}
		}, etcdctl},
		{"etcdctl endpoint health", func(all []string, _ string) []string {
			return []string{"endpoint", "health", "-w", "json", "--endpoints", strings.Join(all, ","), "--command-timeout", t, "--dial-timeout", t}
		}, etcdctl},
		{"etcdctl endpoint health --cluster", func(_ []string, live string) []string {
			return []string{"endpoint", "health", "-w", "json", "--cluster", "--endpoints", live, "--command-timeout", t, "--dial-timeout", t}
		}, etcdctl},
	}
	fmt.Printf("5-member etcd %s cluster, --command-timeout %s, median of %d runs; a dead member is killed (refuses connections) or, for the second one, SIGSTOPped (accepts TCP, never answers)\n\n", *version, t, *runs)
	fmt.Printf("| dead | tool | time | ratio to timeout | live members shown |\n|---:|---|---:|---:|---:|\n")
	for dead := 0; dead <= 3; dead++ {
		if err := scenario(ctx, tmp, etcd, dead, tools, *timeout, *runs); err != nil {
			return err
		}
	}
	return nil
}

func scenario(ctx context.Context, tmp, etcd string, dead int, tools []tool, timeout time.Duration, runs int) error {
	sb, err := sandbox.Up(ctx, sandbox.Options{Dir: filepath.Join(tmp, fmt.Sprintf("dead-%d", dead)), Members: 5, Command: []string{etcd}})
	if sb != nil {
		defer func() {
			for _, m := range sb.Members {
				if m.PID > 0 {
					syscall.Kill(m.PID, syscall.SIGCONT)
				}
			}
			sb.Down(5 * time.Second)
		}()
	}
	if err != nil {
		return err
	}
	// Dead members: m5 killed, m4 stopped (hangs), m3 killed.
	kill := []struct {
		name string
		sig  syscall.Signal
	}{{"m5", syscall.SIGKILL}, {"m4", syscall.SIGSTOP}, {"m3", syscall.SIGKILL}}[:dead]
	for _, k := range kill {
		m, _ := sb.Member(k.name)
		syscall.Kill(m.PID, k.sig)
	}
	time.Sleep(3 * time.Second) // past an election timeout: the survivors know what they lost
	live := 5 - dead
	all := sb.Endpoints()
	m1, _ := sb.Member("m1")
	for _, tl := range tools {
		var times []time.Duration
		shown := 0
		for r := 0; r < runs; r++ {
			started := time.Now()
			out, _ := exec.CommandContext(ctx, tl.bin, tl.args(all, m1.ClientURL)...).Output()
			times = append(times, time.Since(started))
			shown = liveShown(tl.name, out)
		}
		slices.Sort(times)
		med := times[len(times)/2]
		fmt.Printf("| %d | %s | %.2f s | %.2fx | %d of %d |\n", dead, tl.name, med.Seconds(), med.Seconds()/timeout.Seconds(), shown, live)
	}
	return nil
}

// liveShown counts the members with a status (or a health row) in a tool's JSON output.
func liveShown(tool string, out []byte) int {
	if strings.HasPrefix(tool, "etcdmedic") {
		var d struct {
			Members []struct {
				Probe *struct {
					Reached bool `json:"reached"`
				} `json:"probe"`
			} `json:"members"`
		}
		if json.Unmarshal(out, &d) != nil {
			return 0
		}
		n := 0
		for _, m := range d.Members {
			if m.Probe != nil && m.Probe.Reached {
				n++
			}
		}
		return n
	}
	var rows []map[string]any
	if json.Unmarshal(out, &rows) != nil {
		return 0
	}
	n := 0
	for _, r := range rows {
		if h, ok := r["health"]; ok {
			if h == true {
				n++
			}
			continue
		}
		if r["Status"] != nil {
			n++
		}
	}
	return n
}
