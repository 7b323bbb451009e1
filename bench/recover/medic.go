package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
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
	if out, err := exec.CommandContext(ctx, t.etcdmedic, args...).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("etcdmedic recover plan: %v\n%s", err, out)
	}
	steps := []stepTime{{"plan", time.Since(started)}}
	cmd := exec.CommandContext(ctx, t.etcdmedic, "recover", "apply", planDir, "--yes", "-w", "json")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("etcdmedic recover apply: %v\n%s\n%s", err, out, stderr.String())
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
