package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// runEtcdmedic runs recover plan and recover apply --yes, returning the plan's wall time as
// step "plan" and apply's own step timings.
func runEtcdmedic(ctx context.Context, t tools, set *dataSet, dirs []string, runDir string) ([]stepTime, error) {
	ctx, cancel := context.WithTimeout(ctx, runTimeout)
	defer cancel()
	var eps []string
	for _, m := range set.Members {
		eps = append(eps, m.ClientURL)
	}
	planDir := filepath.Join(runDir, "plan")
	args := []string{"recover", "plan", "-w", "json", "--endpoints", strings.Join(eps, ","),
		"--backup-dir", filepath.Join(runDir, "backup"), "--plan-dir", planDir, "--etcd-command", t.etcd}
	for i, m := range set.Members {
		args = append(args, "--data-dir", m.Name+"="+dirs[i])
	}
	for _, f := range set.flags() {
		args = append(args, "--etcd-flag="+f)
	}
	started := time.Now()
	planCmd := exec.CommandContext(ctx, t.etcdmedic, args...)
	// plan's progress is kept beside apply's, stamped the same way.
	var planErr stampedLines
	planErr.start = started
	planCmd.Stderr = &planErr
	out, err := planCmd.Output()
	os.WriteFile(filepath.Join(runDir, "plan.log"), planErr.buf.Bytes(), 0o644)
	if err != nil {
		return nil, fmt.Errorf("etcdmedic recover plan: %v\n%s\n%s", err, out, planErr.buf.String())
	}
	steps := []stepTime{{"plan", time.Since(started)}}
	cmd := exec.CommandContext(ctx, t.etcdmedic, "recover", "apply", planDir, "--yes", "-w", "json")
	// apply's progress, each line stamped with the seconds since apply started, is kept in
	// the run's folder (see -keep) to explain where the time went.
	var stderr stampedLines
	stderr.start = time.Now()
	cmd.Stderr = &stderr
	out, err = cmd.Output()
	os.WriteFile(filepath.Join(runDir, "apply.log"), stderr.buf.Bytes(), 0o644)
	if err != nil {
		return nil, fmt.Errorf("etcdmedic recover apply: %v\n%s\n%s", err, out, stderr.buf.String())
	}
	var res struct {
		Report struct {
			Timings []struct {
				Step     string        `json:"step"`
				Duration time.Duration `json:"durationNs"`
			} `json:"timings"`
		} `json:"report"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		return nil, fmt.Errorf("read apply's report: %v\n%s", err, out)
	}
	for _, s := range res.Report.Timings {
		steps = append(steps, stepTime{s.Step, s.Duration})
	}
	return steps, nil
}

// stampedLines prefixes every line written to it with the seconds since start.
type stampedLines struct {
	start   time.Time
	buf     bytes.Buffer
	partial bool
}

func (w *stampedLines) Write(p []byte) (int, error) {
	for _, line := range bytes.SplitAfter(p, []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		if !w.partial {
			fmt.Fprintf(&w.buf, "%7.3f ", time.Since(w.start).Seconds())
		}
		w.buf.Write(line)
		w.partial = line[len(line)-1] != '\n'
	}
	return len(p), nil
}
