package finding

import (
	"context"
	"errors"
	"time"

	"github.com/etcdmedic/etcdmedic/cluster"
)

// Judged is a view of the cluster with what doctor finds in it.
type Judged struct {
	View     *cluster.View
	Findings []Finding
}

// Critical reports whether any finding is critical.
func (j Judged) Critical() bool { return Worst(j.Findings) == Critical }

// Judge probes the cluster as opts say and judges it with the default rules. Findings are
// never nil, so that JSON shows [] for a clean cluster.
func Judge(ctx context.Context, conn cluster.Conn, opts cluster.ProbeOptions) Judged {
	v := cluster.Diagnose(ctx, conn, opts)
	fs := ForCluster(v, DefaultClusterRules())
	if fs == nil {
		fs = []Finding{}
	}
	return Judged{View: v, Findings: fs}
}

// AwaitOptions say how to wait for a cluster to settle.
type AwaitOptions struct {
	Probe    cluster.ProbeOptions
	Timeout  time.Duration // how long to wait in all
	Interval time.Duration // between two looks (500 ms when zero)
	// Between runs after each look that was not enough (a nudge write, a progress line).
	Between func(Judged)
}

// ErrNotSettled is returned by Await when the cluster did not get there in time.
var ErrNotSettled = errors.New("the cluster did not settle in time")

// Await judges the cluster until done holds, and returns the last judgement. Past the timeout
// it returns ErrNotSettled with the last judgement; a cancelled ctx returns ctx's error.
func Await(ctx context.Context, conn cluster.Conn, opts AwaitOptions, done func(Judged) bool) (Judged, error) {
	interval := opts.Interval
	if interval == 0 {
		interval = 500 * time.Millisecond
	}
	deadline := time.Now().Add(opts.Timeout)
	for {
		j := Judge(ctx, conn, opts.Probe)
		if done(j) {
			return j, nil
		}
		if err := ctx.Err(); err != nil {
			return j, err
		}
		if time.Now().After(deadline) {
			return j, ErrNotSettled
		}
		if opts.Between != nil {
			opts.Between(j)
		}
		select {
		case <-ctx.Done():
			return j, ctx.Err()
		case <-time.After(interval):
		}
	}
}
