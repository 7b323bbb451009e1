package drill

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strings"

	"github.com/etcdmedic/etcdmedic/internal/etcdbin"
	"github.com/etcdmedic/etcdmedic/upgrade"
)

// etcdmedic runs one of etcdmedic's own commands as an operator would type it. What it says
// on stderr (its progress) joins the timeline as it comes; its stdout is returned. An exit code
// other than 0 or 2 (the findings codes) is an error.
func (r *recorder) etcdmedic(ctx context.Context, env Env, args ...string) (string, error) {
	if env.Etcdmedic == "" {
		return "", errors.New("the drill needs etcdmedic's own binary (Env.Etcdmedic)")
	}
	cmd := exec.CommandContext(ctx, env.Etcdmedic, args...)
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	progress, err := cmd.StderrPipe()
	if err != nil {
		return "", err
	}
	if err := cmd.Start(); err != nil {
		return "", err
	}
	var said strings.Builder
	sc := bufio.NewScanner(progress)
	for sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); line != "" {
			r.say("  %s", line)
			said.WriteString(line + "\n")
		}
	}
	err = cmd.Wait()
	var exit *exec.ExitError
	if errors.As(err, &exit) && exit.ExitCode() == 2 {
		err = nil
	}
	if err != nil {
		return stdout.String(), fmt.Errorf("etcdmedic %s: %v\n%s%s", strings.Join(args, " "), err, stdout.String(), said.String())
	}
	return stdout.String(), nil
}

// upgradeReport runs `etcdmedic upgrade check ... -w json` and decodes its report.
func (r *recorder) upgradeReport(ctx context.Context, env Env, args ...string) (*upgrade.Report, error) {
	out, err := r.etcdmedic(ctx, env, append(args, "-w", "json")...)
	if err != nil {
		return nil, err
	}
	var rep upgrade.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		return nil, fmt.Errorf("etcdmedic %s printed no report: %v\n%s", strings.Join(args, " "), err, out)
	}
	return &rep, nil
}

// etcdBinaries returns a real etcd server binary of each version, built from the module proxy
// and cached the first time (about 75 s each), saying so while it builds.
func (r *recorder) etcdBinaries(ctx context.Context, versions ...string) (map[string]string, error) {
	bins := map[string]string{}
	for _, v := range versions {
		if !etcdbin.Cached(v) {
			dir, _ := etcdbin.CacheDir()
			r.say("building etcd %s from the Go module proxy (once, about 75 s; cached in %s)", v, dir)
		}
		path, err := etcdbin.Path(ctx, v)
		if err != nil {
			return nil, err
		}
		bins[v] = path
	}
	return bins, nil
}
