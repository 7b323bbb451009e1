package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// runnerEnv makes this binary run one measured tool instead of the benchmark.
//
// Linux carries the peak RSS of the process that execs a program into the program's
// ru_maxrss (exec accounts the old address space's high-water mark; Go starts children with
// CLONE_VM, so that is the parent's). The benchmark grows to ~100 MiB while it fills etcd, so a
// tool it execs directly reports at least that. A fresh runner process is small: tools it
// starts report their own peak.
const runnerEnv = "ETCDMEDIC_BENCH_RUNNER"

// runnerResult is what the runner reports on fd 3 about the tool it ran.
type runnerResult struct {
	WallNS    int64  `json:"wall_ns"`
	MaxRSSKiB int64  `json:"max_rss_kib"`
	InBlock   int64  `json:"in_block"`
	ExitCode  int    `json:"exit_code"`
	Error     string `json:"error,omitempty"`
}

// runnerMain runs os.Args[1:] with this process's stdin, stdout and stderr, and writes a
// runnerResult to fd 3.
func runnerMain() {
	res := runnerResult{ExitCode: -1}
	cmd := exec.Command(os.Args[1], os.Args[2:]...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	started := time.Now()
	err := cmd.Run()
	res.WallNS = int64(time.Since(started))
	var exit *exec.ExitError
	switch {
	case err == nil || errors.As(err, &exit):
		res.ExitCode = cmd.ProcessState.ExitCode()
		if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			res.MaxRSSKiB, res.InBlock = ru.Maxrss, ru.Inblock
		}
		if res.ExitCode < 0 {
			res.Error = cmd.ProcessState.String()
		}
	default:
		res.Error = err.Error()
	}
	out := os.NewFile(3, "result")
	if err := json.NewEncoder(out).Encode(res); err != nil {
		fmt.Fprintln(os.Stderr, "bench/inspect runner:", err)
		os.Exit(1)
	}
}
