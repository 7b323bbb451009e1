package archive

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/etcdmedic/etcdmedic"
	"github.com/etcdmedic/etcdmedic/cluster"
	"github.com/etcdmedic/etcdmedic/store"
)

// Metrics are backup run's, for Prometheus (served on --metrics-addr).
type Metrics struct {
	LastFullSuccess  prometheus.Gauge
	LastFullBytes    prometheus.Gauge
	LastFullDuration prometheus.Gauge
	CapturedRevision prometheus.Gauge
	CaptureLag       prometheus.Gauge
	Verifications    *prometheus.CounterVec
	PointChecks      *prometheus.CounterVec
	StoreErrors      prometheus.Counter
	lastCaptured     atomic.Int64 // Unix nanoseconds of the newest change stored
}

// NewMetrics registers backup run's metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		LastFullSuccess:  prometheus.NewGauge(prometheus.GaugeOpts{Name: "etcdmedic_backup_last_full_success_timestamp_seconds", Help: "When the last full backup was stored (Unix time)."}),
		LastFullBytes:    prometheus.NewGauge(prometheus.GaugeOpts{Name: "etcdmedic_backup_last_full_bytes", Help: "Size of the last full backup's snapshot, before compression."}),
		LastFullDuration: prometheus.NewGauge(prometheus.GaugeOpts{Name: "etcdmedic_backup_last_full_duration_seconds", Help: "How long the last full backup took."}),
		CapturedRevision: prometheus.NewGauge(prometheus.GaugeOpts{Name: "etcdmedic_backup_captured_revision", Help: "The newest revision whose history is in the store."}),
		CaptureLag:       prometheus.NewGauge(prometheus.GaugeOpts{Name: "etcdmedic_backup_recovery_point_lag_seconds", Help: "Time since the newest change in the store was captured: how much a restore now would lose."}),
		Verifications:    prometheus.NewCounterVec(prometheus.CounterOpts{Name: "etcdmedic_backup_verifications_total", Help: "Verifications by restoring, by result."}, []string{"result"}),
		PointChecks:      prometheus.NewCounterVec(prometheus.CounterOpts{Name: "etcdmedic_backup_point_verifications_total", Help: "Verifications of the newest point in time (backup and history replayed, compared with the live cluster), by result: verified, failed, or error (could not run)."}, []string{"result"}),
		StoreErrors:      prometheus.NewCounter(prometheus.CounterOpts{Name: "etcdmedic_backup_store_errors_total", Help: "Failed writes to the store (retried)."}),
	}
	reg.MustRegister(m.LastFullSuccess, m.LastFullBytes, m.LastFullDuration, m.CapturedRevision, m.CaptureLag, m.Verifications, m.PointChecks, m.StoreErrors)
	return m
}

// RunOptions for Run.
type RunOptions struct {
	Conn  cluster.Conn
	Store *store.Store
	// FullEvery is the time between full backups; Segment between two stores of history.
	FullEvery, Segment time.Duration
	// Verify, when set, verifies each new full backup by restoring it.
	Verify *VerifyOptions
	// VerifyPoint, when set, verifies the newest point in time the store reaches every
	// VerifyPointEvery (VerifyPoint).
	VerifyPoint      *VerifyOptions
	VerifyPointEvery time.Duration
	Scratch          string
	Metrics          *Metrics
	// Say reports progress, one line each.
	Say func(format string, a ...any)
	// OnStored, when set, is told of every segment of history stored, with the capture time of
	// its newest change.
	OnStored func(Segment, time.Time)
}

// Run takes a full backup, then captures the history after it continuously, and takes a new
// full backup every FullEvery, until ctx ends. A full backup that fails is retried with
// backoff; a capture that finds its history compacted starts again from a new full backup.
func Run(ctx context.Context, o RunOptions) error {
	say := o.Say
	if say == nil {
		say = func(string, ...any) {}
	}
	if m := o.Metrics; m != nil {
		// The lag is the whole run's, not a capture's: while no capture runs (full backups
		// failing after the cluster's history went back), it grows, and its alert fires.
		stopLag := make(chan struct{})
		defer close(stopLag)
		go func() {
			tick := time.NewTicker(time.Second)
			defer tick.Stop()
			for {
				select {
				case <-stopLag:
					return
				case <-tick.C:
					if at := m.lastCaptured.Load(); at > 0 {
						m.CaptureLag.Set(time.Since(time.Unix(0, at)).Seconds())
					}
				}
			}
		}()
	}
	if o.VerifyPoint != nil && o.VerifyPointEvery > 0 {
		done := make(chan struct{})
		defer func() { <-done }()
		go func() {
			defer close(done)
			o.verifyPoints(ctx, say)
		}()
	}
	backoff := time.Second
	var f *Full          // the newest full backup taken
	captured := int64(0) // the last revision the previous capture stored
	var carry unstored   // what it received after captured and could not store (store down)
	var last lastChange  // the changes the last capture received, which the cluster must still hold
	var wentBack time.Time
	var wentBackWait time.Duration
	quick := time.Second // the wait after a capture that ended at once, doubling while they do
	for ctx.Err() == nil {
		// A cluster restored while no capture ran (a store outage, the last full backup) must
		// not have its full backup filed under the history captured so far (review 7, F5).
		if f != nil && last.generation == f.Generation && last.any() {
			if err := o.stillHolds(ctx, last); err != nil {
				say("%v: a new full backup starts a new generation of history", err)
				f, captured, carry, last = nil, 0, unstored{}, lastChange{}
			}
		}
		started := time.Now()
		// Against the newest revision received, stored or not: a snapshot below it is of
		// another history (review of the session, 2).
		next, err := o.takeFull(ctx, f, max(captured, carry.to))
		captureFor := o.FullEvery
		switch {
		case err != nil && (f == nil || captured == 0):
			say("full backup failed (retrying in %s): %v", backoff, err)
			sleep(ctx, backoff)
			backoff = min(2*backoff, time.Minute)
			continue
		case err != nil:
			// The history must not wait for a full backup: it goes on from where it stopped.
			say("full backup failed (retrying in %s; the capture goes on from revision %d meanwhile): %v", backoff, captured, err)
			captureFor = backoff
			backoff = min(2*backoff, time.Minute)
		default:
			if f != nil && next.Generation != f.Generation {
				say("full backup %s starts a new generation of history (%s): the cluster's history is not the one captured so far (revision %d, below %d, or another cluster)", next.ID, next.Generation, next.Revision, captured)
				captured, carry = 0, unstored{} // captured from the new backup, never spliced onto the old history
			}
			f, backoff = next, time.Second
			o.tookFull(ctx, f, started, say)
		}
		capturing := time.Now()
		captured, carry, err = o.captureUntilNextFull(ctx, f, captured, carry, &last, captureFor, say)
		// A capture that ends at once (compacted, no leader, no client) is followed by a
		// full backup, a snapshot streamed from every endpoint: not back to back (review 8).
		endedAtOnce := err != nil && ctx.Err() == nil && !errors.Is(err, ErrWentBack) && time.Since(capturing) < time.Second
		switch {
		case errors.Is(err, ErrNotStored) && ctx.Err() != nil:
			return err // asked to end with history it could not store: say so, exit non-zero
		case errors.Is(err, ErrWentBack):
			// Never spliced onto the history captured so far: a new generation, from a new
			// full backup (retried until one is taken, with no capture meanwhile). Again
			// within a minute (endpoints of two clusters, an etcd that sends changes twice),
			// it waits, longer each time, rather than loop on full backups.
			if time.Since(wentBack) < time.Minute {
				wentBackWait = min(max(2*wentBackWait, time.Second), time.Minute)
			} else {
				wentBackWait = 0
			}
			wentBack = time.Now()
			say("%v: a new full backup starts a new generation of history (in %s)", err, wentBackWait)
			sleep(ctx, wentBackWait)
			f, captured, carry, last = nil, 0, unstored{}, lastChange{}
		case errors.Is(err, ErrNotStored) && carry.size() > maxCarried:
			// Kept longer, it would not fit in memory, nor upload as one segment: the next
			// capture watches again from the last revision stored (etcd sends it again, unless
			// it has compacted it meanwhile, which is then said).
			say("%v: more than %d MiB of history waits for the store: let go of, and watched again from revision %d", err, maxCarried>>20, captured)
			carry = unstored{}
		case errors.Is(err, ErrNotStored):
			// A period ended with the store still refusing: the run goes on, the history
			// received is kept (in memory), and the next capture goes on after it: etcd need
			// not send it again, and its compaction meanwhile loses nothing.
			say("%v: kept, and stored once the store takes it; a new full backup, and the capture goes on after revision %d", err, carry.to)
		case errors.Is(err, ErrCompacted):
			say("%v: a new full backup", err)
		case err != nil && ctx.Err() == nil:
			say("%v: a new full backup, and the capture goes on from revision %d", err, captured)
		}
		if endedAtOnce {
			sleep(ctx, quick)
			quick = min(2*quick, time.Minute)
		} else {
			quick = time.Second
		}
	}
	return ctx.Err()
}

// lastChange is what the last capture of generation received and the next one checks: its
// witnesses.
type lastChange struct {
	generation Generation
	witnesses
}

// any reports whether last holds a change to check.
func (last lastChange) any() bool { return len(last.all()) > 0 }

// stillHolds asks the cluster, through a client of the run's connection, whether it still
// holds last's changes (see stillHolds). No client tells nothing.
func (o RunOptions) stillHolds(ctx context.Context, last lastChange) error {
	cli, err := o.Conn.Client()
	if err != nil {
		return nil // no answer tells nothing
	}
	defer cli.Close()
	for _, p := range last.all() {
		if err := stillHolds(ctx, cli, p); err != nil {
			return err
		}
	}
	return nil
}

// maxCarried bounds the history a run keeps in memory for a store that refuses it, from one
// capture period to the next.
const maxCarried = 256 << 20

// size is about how many bytes u's changes take.
func (u unstored) size() int {
	n := 0
	for _, e := range u.events {
		n += len(e.Key) + len(e.Value) + 64
	}
	return n
}

// takeFull takes a full backup from the first endpoint that gives one: a member down must not
// stop the backups of a cluster that still serves. It continues the generation of prev (nil:
// the run's first, a new generation), whose history is stored up to captured.
func (o RunOptions) takeFull(ctx context.Context, prev *Full, captured int64) (*Full, error) {
	opts := TakeOptions{Scratch: o.Scratch}
	if prev != nil {
		opts.Generation, opts.Captured, opts.ClusterID = prev.Generation, captured, prev.ClusterID
	}
	var errs []error
	for i, endpoint := range o.Conn.Endpoints {
		conn := o.Conn
		conn.Endpoints = append([]string{endpoint}, slices.Delete(slices.Clone(o.Conn.Endpoints), i, i+1)...)
		f, err := TakeFull(ctx, conn, o.Store, opts)
		if err == nil {
			return f, nil
		}
		if o.Metrics != nil {
			o.Metrics.StoreErrors.Inc()
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	if len(errs) == 0 {
		return nil, errors.New("no endpoint to take a backup from")
	}
	return nil, errors.Join(errs...)
}

// tookFull reports a new full backup (metrics, a line) and verifies it when asked.
func (o RunOptions) tookFull(ctx context.Context, f *Full, started time.Time, say func(string, ...any)) {
	say("full backup %s: revision %d, %d bytes (%d stored) in %.1fs", f.ID, f.Revision, f.Data.Bytes, f.Data.StoredBytes, time.Since(started).Seconds())
	if m := o.Metrics; m != nil {
		m.LastFullSuccess.Set(float64(time.Now().Unix()))
		m.LastFullBytes.Set(float64(f.Data.Bytes))
		m.LastFullDuration.Set(time.Since(started).Seconds())
		// A recovery point newer than the history stored: of when the snapshot was asked for
		// (f.Taken is after its download, and changes made meanwhile are not in it).
		if started.UnixNano() > m.lastCaptured.Load() {
			m.CapturedRevision.Set(float64(f.Revision))
			m.lastCaptured.Store(started.UnixNano())
		}
	}
	if o.Verify != nil {
		go func() {
			v, err := Verify(ctx, o.Store, f, *o.Verify)
			if err != nil {
				say("verify %s: %v", f.ID, err)
				return
			}
			say("verify %s: %s %s", f.ID, v.Result, v.Why)
			if o.Metrics != nil {
				o.Metrics.Verifications.WithLabelValues(v.Result).Inc()
			}
		}()
	}
}

// captureUntilNextFull captures history for d (until the next full backup is due), from where
// the previous capture stopped (captured, and carry: what it received after that and could not
// store): when that is behind f, the revisions between the two (changed while f was taken and
// uploaded) are stored too, and the history stays whole across full backups, whichever of them
// a restore starts from. If those are compacted already, it captures from f. It returns the
// last revision stored, and what it received after it and could not store.
func (o RunOptions) captureUntilNextFull(ctx context.Context, f *Full, captured int64, carry unstored, last *lastChange, d time.Duration, say func(string, ...any)) (int64, unstored, error) {
	if captured == 0 {
		stored, left, err := o.capture(ctx, f.Generation, f.ClusterID, unstored{from: f.Revision, to: f.Revision}, last, d)
		return max(stored, f.Revision), left, err
	}
	// Between two captures (a full backup taken, a store outage) no check ran: the cluster
	// must still hold the newest change received before the watch goes on after it.
	if last.generation == f.Generation && last.any() {
		if err := o.stillHolds(ctx, *last); err != nil {
			return captured, carry, err
		}
	}
	start := unstored{from: captured, to: captured}
	if carry.from == captured && carry.to > captured {
		start = carry
	}
	stored, left, err := o.capture(ctx, f.Generation, f.ClusterID, start, last, d)
	if !errors.Is(err, ErrCompacted) || stored > captured || captured >= f.Revision {
		return max(stored, captured), left, err
	}
	say("revisions %d to %d were compacted before they were stored: a restore cannot reach them; capturing from backup %s", captured+1, f.Revision, f.ID)
	stored, left, err = o.capture(ctx, f.Generation, f.ClusterID, unstored{from: f.Revision, to: f.Revision}, last, d)
	return max(stored, f.Revision), left, err
}

// capture captures history of generation gen, of cluster clusterID, for d, going on from start
// (see capture).
func (o RunOptions) capture(ctx context.Context, gen Generation, clusterID etcdmedic.ClusterID, start unstored, last *lastChange, d time.Duration) (int64, unstored, error) {
	cctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	c := o.Conn
	cli, err := c.Client()
	if err != nil {
		return start.from, start, err
	}
	defer cli.Close()
	held := newContinuity(start.to, uint64(clusterID))
	if last.generation == gen {
		// The previous capture's changes are checked each second until a check answers: a
		// change of another history received first must not take their place unchecked.
		held.witnesses = last.witnesses
		held.anchor = cmp.Or(last.anchor, last.newest)
	}
	unchecked := func(err error) {
		if o.Say != nil {
			o.Say("the capture cannot ask the cluster for its revision (%d tries: %v): it would not see a restore below what it captured until the cluster has passed it", uncheckedSaid, err)
		}
	}
	stored, left, err := capture(cctx, cli, o.Store, gen, start, o.Segment, func(s Segment, at time.Time) {
		if m := o.Metrics; m != nil {
			m.CapturedRevision.Set(float64(s.To))
			m.lastCaptured.Store(at.UnixNano())
		}
		if o.OnStored != nil {
			o.OnStored(s, at)
		}
	}, held, unchecked)
	if next := (lastChange{generation: gen, witnesses: held.witnesses}); next.any() {
		*last = next
	}
	if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
		return stored, left, nil // time for the next full backup
	}

	if err != nil && ctx.Err() == nil {
		return stored, left, fmt.Errorf("capture: %w", err)
	}
	return stored, left, err
}

// verifyPoints verifies the newest point the store reaches every VerifyPointEvery, one at a
// time, until ctx ends.
func (o RunOptions) verifyPoints(ctx context.Context, say func(string, ...any)) {
	tick := time.NewTicker(o.VerifyPointEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		result := "error"
		v, err := o.verifyPointOnce(ctx)
		switch {
		case err != nil && ctx.Err() != nil:
			return
		case err != nil:
			say("verify the newest point: %v", err)
		default:
			result = v.Result
			say("verify point r%d (backup %s, %d revisions replayed): %s %s", v.Revision, v.From, v.Replayed, v.Result, v.Why)
		}
		if o.Metrics != nil {
			o.Metrics.PointChecks.WithLabelValues(result).Inc()
		}
	}
}

func (o RunOptions) verifyPointOnce(ctx context.Context) (*Verification, error) {
	if err := o.Conn.Reach(ctx, o.Conn.Endpoints[0]); err != nil {
		return nil, err
	}
	cli, err := o.Conn.Client()
	if err != nil {
		return nil, err
	}
	defer cli.Close()
	return VerifyPoint(ctx, o.Store, cli, o.Conn.Endpoints[0], *o.VerifyPoint)
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}
