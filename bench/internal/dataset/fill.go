package dataset

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// writers is how many goroutines put values; etcd batches their proposals.
const writers = 32

// Filled is what Fill wrote.
type Filled struct {
	Keys         int64
	WrittenBytes int64
}

// Fill puts valueBytes-sized values under unique keys (/bench/%09d) from several goroutines
// until the db file at dbPath is at least size bytes. It writes at most 4x size, in case the
// db does not grow as expected. progress, if set, logs every 10 s.
func Fill(ctx context.Context, cli *clientv3.Client, dbPath string, size, valueBytes int64, progress func(format string, args ...any)) (Filled, error) {
	return fill(ctx, cli, dbPath, size, valueBytes, false, progress)
}

// FillDistinct is Fill with a value of its own, random, for every key: a db that does not
// compress (one value repeated compresses to almost nothing, which no real key space does).
func FillDistinct(ctx context.Context, cli *clientv3.Client, dbPath string, size, valueBytes int64, progress func(format string, args ...any)) (Filled, error) {
	return fill(ctx, cli, dbPath, size, valueBytes, true, progress)
}

func fill(ctx context.Context, cli *clientv3.Client, dbPath string, size, valueBytes int64, distinct bool, progress func(format string, args ...any)) (Filled, error) {
	value := make([]byte, valueBytes)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range value {
		value[i] = byte(r.Uint32())
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	limit := 4 * size / valueBytes
	var next, written atomic.Int64
	errs := make(chan error, writers)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			own := value
			rng := rand.NewChaCha8([32]byte{byte(w)})
			if distinct {
				own = make([]byte, valueBytes)
			}
			for {
				n := next.Add(1)
				if n > limit || ctx.Err() != nil {
					return
				}
				if distinct {
					rng.Read(own)
				}
				pctx, pcancel := context.WithTimeout(ctx, 30*time.Second)
				_, err := cli.Put(pctx, fmt.Sprintf("/bench/%09d", n), string(own))
				pcancel()
				if err != nil {
					if ctx.Err() == nil {
						errs <- fmt.Errorf("put: %w", err)
						cancel()
					}
					return
				}
				written.Add(1)
			}
		}()
	}
	// The db file grows as the backend commits (every 100 ms); watching the file itself keeps
	// the overshoot to a commit or two of writes.
	reached := false
	lastLog := time.Now()
	for !reached && ctx.Err() == nil && next.Load() <= limit {
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
		if st, err := os.Stat(dbPath); err == nil {
			reached = st.Size() >= size
			if progress != nil && time.Since(lastLog) > 10*time.Second {
				progress("  db %d MiB of %d MiB", st.Size()>>20, size>>20)
				lastLog = time.Now()
			}
		}
	}
	cancel()
	wg.Wait()
	close(errs)
	out := Filled{Keys: written.Load(), WrittenBytes: written.Load() * valueBytes}
	if err := <-errs; err != nil {
		return out, err
	}
	if !reached {
		return out, fmt.Errorf("db did not reach %d bytes after %d puts of %d bytes", size, out.Keys, valueBytes)
	}
	return out, nil
}
