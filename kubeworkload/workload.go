// Package kubeworkload is a Kubernetes workload through client-go, shaped like controllers':
// clients that create, update (with resourceVersion preconditions) and delete ConfigMaps and
// Secrets at a steady rate, each through its own apiserver and on objects of its own, and
// informers on them, one per apiserver. It remembers what the apiservers acknowledged and,
// after a repair, checks the cluster against it: nothing acknowledged lost, no acknowledged
// delete undone, resourceVersions never going back, every informer's cache converging on the
// truth.
package kubeworkload

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcdmedic/etcdmedic/kubeapi"
)

// Spec describes the workload.
type Spec struct {
	// APIServers are the apiservers; client i talks to APIServers[i % len], and each has its
	// own informers.
	APIServers  []kubeapi.Server
	Credentials *kubeapi.Credentials
	// Namespace holds every object; "" means "etcdmedic-workload".
	Namespace string
	// Clients is the number of writing clients; 0 means 4.
	Clients int
	// Rate is each client's operations a second; 0 means 20.
	Rate int
	// Objects is how many names each client writes (half ConfigMaps, half Secrets); 0 means 16.
	Objects int
}

func (s Spec) withDefaults() Spec {
	if s.Namespace == "" {
		s.Namespace = "etcdmedic-workload"
	}
	if s.Clients <= 0 {
		s.Clients = 4
	}
	if s.Rate <= 0 {
		s.Rate = 20
	}
	if s.Objects <= 0 {
		s.Objects = 16
	}
	return s
}

// Workload is a running Kubernetes workload.
type Workload struct {
	spec      Spec
	clients   []*client
	informers []*informer
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	stopOnce  sync.Once
	started   time.Time
	// gate is held shared by each operation; Pause holds it alone.
	gate   sync.RWMutex
	paused atomic.Bool
}

// Pause waits for the operations in flight and holds the clients until Resume (the informers
// go on): a drill pauses the workload before a power cut, so that what it acknowledged is on
// the disk that survives.
func (w *Workload) Pause() {
	w.gate.Lock()
	w.paused.Store(true)
}

// Resume lets the clients go on after Pause (and does nothing when not paused).
func (w *Workload) Resume() {
	if w.paused.CompareAndSwap(true, false) {
		w.gate.Unlock()
	}
}

// Start creates the namespace (through the first apiserver), starts the informers and waits
// for their first sync, then starts the clients.
func Start(ctx context.Context, spec Spec) (*Workload, error) {
	spec = spec.withDefaults()
	if len(spec.APIServers) == 0 || spec.Credentials == nil {
		return nil, errors.New("a Kubernetes workload needs apiservers and credentials")
	}
	cs, err := kubeapi.Clientset(spec.APIServers[0].URL, spec.Credentials)
	if err != nil {
		return nil, err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: spec.Namespace}}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("create namespace %s: %w", spec.Namespace, err)
	}
	runCtx, cancel := context.WithCancel(context.Background())
	w := &Workload{spec: spec, cancel: cancel, started: time.Now()}
	for _, s := range spec.APIServers {
		inf, err := startInformer(runCtx, s, spec)
		if err != nil {
			cancel()
			return nil, err
		}
		w.informers = append(w.informers, inf)
	}
	for _, inf := range w.informers {
		if err := inf.waitSynced(ctx, 30*time.Second); err != nil {
			cancel()
			return nil, err
		}
	}
	for i := 0; i < spec.Clients; i++ {
		c, err := newClient(i, spec.APIServers[i%len(spec.APIServers)].URL, spec, &w.gate)
		if err != nil {
			cancel()
			return nil, err
		}
		w.clients = append(w.clients, c)
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			c.run(runCtx)
		}()
	}
	return w, nil
}

// StopWriting stops the clients (the informers keep watching) and waits for them.
func (w *Workload) StopWriting() {
	for _, c := range w.clients {
		c.stop()
	}
	w.Resume() // a paused client would never see it is stopped
	w.wg.Wait()
}

// Stop stops the clients and the informers.
func (w *Workload) Stop() {
	w.stopOnce.Do(func() {
		w.StopWriting()
		w.cancel()
	})
}

// Counts are the workload's operations by outcome.
type Counts struct {
	Acked         int `json:"acked"`
	Failed        int `json:"failed"`        // refused: never applied
	Indeterminate int `json:"indeterminate"` // timed out or connection lost: maybe applied
}

// Counts returns the operations so far.
func (w *Workload) Counts() Counts {
	var n Counts
	for _, c := range w.clients {
		c.mu.Lock()
		n.Acked += c.counts.Acked
		n.Failed += c.counts.Failed
		n.Indeterminate += c.counts.Indeterminate
		c.mu.Unlock()
	}
	return n
}
