// Package drill reproduces the incidents etcdmedic exists for on a local sandbox cluster,
// repairs them with etcdmedic's own commands, and counts what was lost: the proof, on the
// user's own machine, that the repair works.
package drill

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcdmedic/etcdmedic/ledger"
	"github.com/etcdmedic/etcdmedic/runtime"
	"github.com/etcdmedic/etcdmedic/runtime/local"
	"github.com/etcdmedic/etcdmedic/sandbox"
)

// Env is where drills run.
type Env struct {
	// Dir holds one folder per drill (sandbox data dirs, logs, plans, backups).
	Dir string
	// Command runs etcd: {"/path/etcdmedic", "etcd"} for the linked one.
	Command []string
	// CrashFS runs a crash filesystem server (`etcdmedic internal-crashfs`), for the power-cut
	// drill: its own process, since the drill reads the members' dbs through mmap.
	CrashFS []string
	// Etcdmedic is etcdmedic's own binary: drills run its commands as an operator types them.
	Etcdmedic string
	// Naive runs the upgrade drill's in-place upgrade by hand instead of etcdmedic's.
	Naive bool
	// Kubernetes runs a kube-apiserver beside each member and a client-go workload through
	// them, checked after the repair (drill --kubernetes).
	Kubernetes bool
	Out        io.Writer
}

// Result is one drill's outcome.
type Result struct {
	Drill    string  `json:"drill"`
	Incident string  `json:"incident"`
	Timeline []Event `json:"timeline"`
	Acked    int     `json:"ackedWrites"`
	// Failed are the ledger's writes that returned an error: not acknowledged, but a timeout
	// may still have been applied (ledger.Failed), so nothing is promised about them.
	Failed    int     `json:"failedWrites"`
	Lost      int     `json:"lostWrites"` // acknowledged, then missing: must be 0
	Repair    string  `json:"repair"`
	RepairSec float64 `json:"repairSeconds"`
	Passed    bool    `json:"passed"`
	Dir       string  `json:"dir"`
	// Skipped says why the drill could not run here (it is then neither passed nor failed).
	Skipped string `json:"skipped,omitempty"`
	// Stopped: the drill was interrupted (SIGINT, SIGTERM) before it finished, and its sandbox
	// torn down; it neither passed nor failed.
	Stopped bool `json:"stopped,omitempty"`
	// Checked is the workload's history and the checker's verdict, for drills that run it.
	Checked *Checked `json:"checked,omitempty"`
	// PowerCut is set by the power-cut drill.
	PowerCut *PowerCut `json:"powerCut,omitempty"`
	// TotalLoss is set by the total-loss drill.
	TotalLoss *TotalLoss `json:"totalLoss,omitempty"`
	// Kubernetes is the Kubernetes workload's check (drill --kubernetes).
	Kubernetes *KubeChecked `json:"kubernetes,omitempty"`
	// NaiveFailure is how the in-place upgrade failed (the upgrade drill with --naive).
	NaiveFailure string `json:"naiveFailure,omitempty"`
}

// Event is one line of a drill's timeline.
type Event struct {
	AtSec float64 `json:"atSeconds"`
	What  string  `json:"what"`
}

// Drill is one incident reproduced and repaired.
type Drill struct {
	Name     string
	Incident string
	Run      func(ctx context.Context, env Env, r *recorder) error
}

// All lists every drill, in the order `etcdmedic drill` runs them.
func All() []Drill {
	return []Drill{
		{Name: "stale-volume", Incident: "1: a replacement member starts on a reused volume that still holds a removed member's data", Run: staleVolume},
		{Name: "quorum-loss", Incident: "2: one member wiped, a second lost: quorum gone on a 3-member cluster", Run: quorumLoss},
		{Name: "upgrade", Incident: "3: a v3.5.19 cluster grown by promoted learners, its membership drifted, upgraded to v3.6", Run: upgradeDrill},
		{Name: "power-cut", Incident: "2 after a power cut: the whole cluster's power cut, two members' disks lost, recovery from the third", Run: powerCut},
		{Name: "total-loss", Incident: "total loss: every member's disk lost under write load, the cluster rebuilt from backup run's object store", Run: totalLoss},
	}
}

// Find returns the drill called name.
func Find(name string) (Drill, bool) {
	for _, d := range All() {
		if d.Name == name {
			return d, true
		}
	}
	return Drill{}, false
}

// recorder keeps the timeline and the write ledger of one drill.
type recorder struct {
	start  time.Time
	out    io.Writer
	result *Result
	ledger *ledger.Ledger
	repair time.Time
	kube   *kube // set by drills run with Env.Kubernetes
	sayMu  sync.Mutex
}

// say adds a line to the timeline and prints it. Safe from any goroutine (backup run and the
// repairs' background backups report while the drill goes on).
func (r *recorder) say(format string, a ...any) {
	r.sayMu.Lock()
	defer r.sayMu.Unlock()
	e := Event{AtSec: time.Since(r.start).Seconds(), What: fmt.Sprintf(format, a...)}
	r.result.Timeline = append(r.result.Timeline, e)
	if r.out != nil {
		fmt.Fprintf(r.out, "  t+%5.1fs  %s\n", e.AtSec, e.What)
	}
}

// timeline is a writer whose every line joins the timeline as it comes, indented under the
// step that writes it: the progress of the etcdmedic commands a drill runs in its own process.
type timeline struct {
	r       *recorder
	mu      sync.Mutex
	partial []byte
}

func (t *timeline) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.partial = append(t.partial, p...)
	for {
		i := bytes.IndexByte(t.partial, '\n')
		if i < 0 {
			return len(p), nil
		}
		if line := strings.TrimSpace(string(t.partial[:i])); line != "" {
			t.r.say("  %s", line)
		}
		t.partial = t.partial[i+1:]
	}
}

// Run runs one drill in env.Dir/<name>.
func Run(ctx context.Context, d Drill, env Env) (*Result, error) {
	env.Dir = env.Dir + "/" + d.Name
	res := &Result{Drill: d.Name, Incident: d.Incident, Dir: env.Dir}
	rec := &recorder{start: time.Now(), out: env.Out, result: res}
	if env.Out != nil {
		fmt.Fprintf(env.Out, "DRILL %s (incident %s)\n", d.Name, d.Incident)
	}
	err := d.Run(ctx, env, rec)
	if rec.kube != nil {
		rec.kube.stop()
	}
	var skip skipped
	if errors.As(err, &skip) {
		res.Skipped = skip.reason
		return res, nil
	}
	if !rec.repair.IsZero() && res.RepairSec == 0 {
		res.RepairSec = time.Since(rec.repair).Seconds()
	}
	res.Passed = err == nil && res.Lost == 0 && res.Acked > 0 && (res.Checked == nil || res.Checked.Passed) &&
		(!env.Kubernetes || (res.Kubernetes != nil && res.Kubernetes.Passed))
	return res, err
}

// skipped is a drill's error when what it needs is not on this machine.
type skipped struct{ reason string }

func (s skipped) Error() string { return "skipped: " + s.reason }

// startLoad begins the write ledger on the sandbox.
func (r *recorder) startLoad(ctx context.Context, sb *sandbox.Sandbox) (*clientv3.Client, error) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: sb.Endpoints(), DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return nil, err
	}
	r.ledger, err = ledger.Start(ctx, cli, ledger.Spec{Prefix: "drill/", Rate: 50, RequestTimeout: time.Second})
	if err != nil {
		cli.Close()
		return nil, err
	}
	r.say("write load started: 50 writes/s, each acknowledged write recorded")
	return cli, nil
}

// count stops the load and checks every acknowledged write against the repaired cluster.
func (r *recorder) count(ctx context.Context, endpoints []string) error {
	if err := r.checkKubernetes(ctx, endpoints); err != nil {
		return err
	}
	r.ledger.Stop()
	acked := r.ledger.Acked()
	missing, err := missingAfterRepair(ctx, endpoints, acked)
	if err != nil {
		return err
	}
	r.result.Acked, r.result.Failed, r.result.Lost = len(acked), r.ledger.Failed(), len(missing)
	r.say("%d writes acknowledged, %d errored while broken (not acknowledged; may or may not have been applied), %d acknowledged writes lost", len(acked), r.ledger.Failed(), len(missing))
	return nil
}

// missingAfterRepair reads every write back from the repaired cluster and returns those it lacks.
func missingAfterRepair(ctx context.Context, endpoints []string, writes []ledger.Write) ([]ledger.Write, error) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return nil, err
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	missing, err := ledger.Missing(ctx, cli, writes)
	if err != nil {
		return nil, fmt.Errorf("read back the acknowledged writes: %w", err)
	}
	return missing, nil
}

// stopAll stops what the drill started, clients first, as a node shuts down: the Kubernetes
// workload, then the apiservers (sb.Down), then every etcd running on the sandbox's data dirs
// or on others' (a member moved to a volume), however it was started. An etcd asked to stop
// waits for its clients' watch streams to end, up to 7 s; with its clients gone first, it
// exits at once.
func (r *recorder) stopAll(sb *sandbox.Sandbox, rt local.Runtime, others ...runtime.MemberSpec) {
	if r.kube != nil {
		r.kube.stop()
	}
	sb.Down(5 * time.Second)
	specs := others
	for _, m := range sb.Members {
		specs = append(specs, runtime.MemberSpec{Name: m.Name, DataDir: m.DataDir})
	}
	for _, spec := range specs {
		rt.Stop(context.Background(), spec)
	}
}

// RunAll runs the drills one after the other in env and returns every result, and how many
// failed (a skipped drill did not fail). A drill that errs is reported on env.Out and the next
// one runs. Once ctx ends, a drill it cut short (one that ended with an error) is reported
// stopped, not failed (what its repair says, cut short, is no verdict), and no other drill
// starts.
func RunAll(ctx context.Context, drills []Drill, env Env) ([]*Result, int) {
	var results []*Result
	failed := 0
	for _, d := range drills {
		if ctx.Err() != nil {
			break
		}
		r, err := Run(ctx, d, env)
		results = append(results, r)
		// A drill that returned no error reached its verdict (lost writes included), whatever
		// came during its teardown: only one cut short by the stop is stopped.
		if ctx.Err() != nil && err != nil && r.Skipped == "" {
			r.Stopped = true
			if env.Out != nil {
				fmt.Fprintf(env.Out, "  STOPPED before it finished (%v); its sandbox is torn down (its last error: %v)\n", context.Cause(ctx), err)
			}
			continue
		}
		if err != nil && env.Out != nil {
			fmt.Fprintf(env.Out, "  FAILED: %v\n", err)
		}
		if !r.Passed && r.Skipped == "" {
			failed++
		}
	}
	return results, failed
}
