package drill

import (
	"math"
	"slices"
	"time"

	"github.com/etcdmedic/etcdmedic/workload"
)

// Second is one second of a drill's workload on the drill's clock: the operations that ended in
// it, by outcome, and the latency of the acknowledged ones.
type Second struct {
	// AtSec is when the second began, in whole seconds since the drill started.
	AtSec         int `json:"atSeconds"`
	Acked         int `json:"acked"`
	Failed        int `json:"failed"`
	Indeterminate int `json:"indeterminate"`
	// P50Ms and P99Ms are the median and 99th percentile latency of the acknowledged operations,
	// in milliseconds; 0 when none was acknowledged.
	P50Ms float64 `json:"p50Ms"`
	P99Ms float64 `json:"p99Ms"`
}

// seriesOf buckets the history's operations by the second they ended in, relative to start.
// Every second from the first to the last is present, so an outage shows as seconds of zero.
func seriesOf(h *workload.History, start time.Time) []Second {
	first, last, ok := bucketSpan(h, start)
	if !ok {
		return nil
	}
	series := make([]Second, last-first+1)
	latencies := make([][]float64, len(series))
	for i := range series {
		series[i].AtSec = first + i
	}
	for _, op := range h.Ops {
		if op.End.IsZero() {
			continue
		}
		i := bucketOf(op.End, start) - first
		switch op.Outcome {
		case workload.OK:
			series[i].Acked++
			latencies[i] = append(latencies[i], float64(op.End.Sub(op.Start))/float64(time.Millisecond))
		case workload.Failed:
			series[i].Failed++
		case workload.Indeterminate:
			series[i].Indeterminate++
		}
	}
	for i, ms := range latencies {
		series[i].P50Ms, series[i].P99Ms = percentile(ms, 0.50), percentile(ms, 0.99)
	}
	return series
}

// bucketSpan returns the first and last second the workload ran in: from its start (or its first
// op) to its end (or its last op). ok is false when there is nothing to bucket.
func bucketSpan(h *workload.History, start time.Time) (first, last int, ok bool) {
	var ends []time.Time
	for _, t := range []time.Time{h.Start, h.End} {
		if !t.IsZero() {
			ends = append(ends, t)
		}
	}
	for _, op := range h.Ops {
		if !op.End.IsZero() {
			ends = append(ends, op.End)
		}
	}
	if len(ends) == 0 {
		return 0, 0, false
	}
	lo := slices.MinFunc(ends, time.Time.Compare)
	hi := slices.MaxFunc(ends, time.Time.Compare)
	return bucketOf(lo, start), bucketOf(hi, start), true
}

// bucketOf is the second since start that t falls in.
func bucketOf(t, start time.Time) int {
	return int(math.Floor(t.Sub(start).Seconds()))
}

// percentile is the nearest-rank q-th percentile of values (0 when empty); it sorts values.
func percentile(values []float64, q float64) float64 {
	if len(values) == 0 {
		return 0
	}
	slices.Sort(values)
	rank := int(math.Ceil(q * float64(len(values))))
	return values[max(rank, 1)-1]
}
