package drill

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/etcdmedic/etcdmedic/kubeapi"
	"github.com/etcdmedic/etcdmedic/sandbox"
)

// APIServerOutage is how long one apiserver was not ready during a drill, on the drill's clock.
type APIServerOutage struct {
	APIServer string  `json:"apiserver"` // named after its member
	FromSec   float64 `json:"fromSeconds,omitempty"`
	UntilSec  float64 `json:"untilSeconds,omitempty"`
	// NotReadySec is the longest time it was not ready; 0 when it never was.
	NotReadySec float64 `json:"notReadySeconds"`
}

// readiness asks every apiserver for /readyz four times a second, for the whole drill, and
// keeps each one's longest stretch of not being ready.
type readiness struct {
	start  time.Time
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	out    map[string]*APIServerOutage
}

func watchReadiness(sb *sandbox.Sandbox, start time.Time) *readiness {
	ctx, cancel := context.WithCancel(context.Background())
	r := &readiness{start: start, cancel: cancel, out: map[string]*APIServerOutage{}}
	for _, s := range sb.Kubernetes.APIServers {
		r.out[s.Name] = &APIServerOutage{APIServer: s.Name}
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			r.watch(ctx, s, &sb.Kubernetes.Credentials)
		}()
	}
	return r
}

func (r *readiness) watch(ctx context.Context, s kubeapi.Server, c *kubeapi.Credentials) {
	var down time.Time
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		rctx, cancel := context.WithTimeout(ctx, time.Second)
		err := kubeapi.Ready(rctx, s.URL, c)
		cancel()
		if ctx.Err() != nil {
			return
		}
		now := time.Now()
		switch {
		case err != nil && down.IsZero():
			down = now
		case err == nil && !down.IsZero():
			r.record(s.Name, down, now)
			down = time.Time{}
		}
		select {
		case <-ctx.Done():
			if !down.IsZero() {
				r.record(s.Name, down, time.Now())
			}
			return
		case <-tick.C:
		}
	}
}

func (r *readiness) record(name string, from, until time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	o := r.out[name]
	if d := until.Sub(from).Seconds(); d > o.NotReadySec {
		o.NotReadySec, o.FromSec, o.UntilSec = d, from.Sub(r.start).Seconds(), until.Sub(r.start).Seconds()
	}
}

// stop ends the watch and returns each apiserver's longest outage.
func (r *readiness) stop() []APIServerOutage {
	r.cancel()
	r.wg.Wait()
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []APIServerOutage
	for _, o := range r.out {
		out = append(out, *o)
	}
	slices.SortFunc(out, func(a, b APIServerOutage) int { return strings.Compare(a.APIServer, b.APIServer) })
	return out
}
