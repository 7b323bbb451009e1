package kubeworkload

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/etcdmedic/etcdmedic/kubeapi"
	"github.com/etcdmedic/etcdmedic/workload"
)

// client writes its own objects through one apiserver, one operation at a time, and remembers
// what the apiserver acknowledged of each.
type client struct {
	id      int
	server  string
	ns      string
	rate    int
	cs      *kubernetes.Clientset
	rng     *rand.Rand
	seq     int
	objects []*object
	quit    chan struct{}
	once    sync.Once
	gate    *sync.RWMutex

	mu         sync.Mutex
	counts     Counts
	maxRV      int64 // the highest resourceVersion this client has seen
	violations []Violation
	ops        []workload.Op // every operation, as the key-value operation it is
}

func newClient(id int, server string, spec Spec, gate *sync.RWMutex) (*client, error) {
	cs, err := kubeapi.Clientset(server, spec.Credentials)
	if err != nil {
		return nil, err
	}
	c := &client{id: id, server: server, ns: spec.Namespace, rate: spec.Rate, cs: cs, rng: rand.New(rand.NewPCG(uint64(id), 7)), quit: make(chan struct{}), gate: gate}
	for i := 0; i < spec.Objects; i++ {
		kind := ConfigMap
		if i%2 == 1 {
			kind = Secret
		}
		c.objects = append(c.objects, &object{Kind: kind, Name: fmt.Sprintf("c%d-%s-%02d", id, kind, i)})
	}
	return c, nil
}

func (c *client) stop() { c.once.Do(func() { close(c.quit) }) }

func (c *client) run(ctx context.Context) {
	tick := time.NewTicker(time.Second / time.Duration(c.rate))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.quit:
			return
		case <-tick.C:
		}
		c.gate.RLock()
		c.step(ctx, c.objects[c.rng.IntN(len(c.objects))])
		c.gate.RUnlock()
	}
}

// step is one operation on o: resolve it first when an earlier operation left it uncertain,
// then create it when absent, else update it (70%) or delete it (30%), each with the
// resourceVersion last acknowledged as precondition.
func (c *client) step(ctx context.Context, o *object) {
	if o.uncertain() {
		c.resolve(ctx, o)
		return
	}
	c.seq++
	value := fmt.Sprintf("c%d-%d", c.id, c.seq)
	opCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	// Each operation is also recorded as the key-value operation it is on etcd, for the
	// history checker: a create is a compare-and-swap on an absent key, an update one on the
	// resourceVersion it names (etcd's mod revision), a delete with a precondition a delete.
	op := workload.Op{Client: c.id, Key: o.String(), Value: value, Kind: workload.CompareAndSwap, Start: time.Now()}
	switch {
	case o.Known == nil:
		rv, err := c.write(opCtx, o, value, "")
		c.settle(o, err, &State{Data: value, RV: rv}, op)
	case c.rng.IntN(10) < 7:
		op.ExpectModRevision = revision(o.Known.RV)
		rv, err := c.write(opCtx, o, value, o.Known.RV)
		c.settle(o, err, &State{Data: value, RV: rv}, op)
	default:
		op.Kind, op.Value = workload.Delete, ""
		err := c.delete(opCtx, o, o.Known.RV)
		c.settle(o, err, nil, op)
	}
}

func revision(rv string) int64 {
	n, _ := strconv.ParseInt(rv, 10, 64)
	return n
}

// write creates o (precondition "") or updates it from resourceVersion precondition, and
// returns the new resourceVersion.
func (c *client) write(ctx context.Context, o *object, value, precondition string) (string, error) {
	meta := metav1.ObjectMeta{Name: o.Name, Namespace: c.ns, ResourceVersion: precondition}
	var got metav1.Object
	var err error
	switch o.Kind {
	case ConfigMap:
		cm := &corev1.ConfigMap{ObjectMeta: meta, Data: map[string]string{"v": value}}
		if precondition == "" {
			got, err = c.cs.CoreV1().ConfigMaps(c.ns).Create(ctx, cm, metav1.CreateOptions{})
		} else {
			got, err = c.cs.CoreV1().ConfigMaps(c.ns).Update(ctx, cm, metav1.UpdateOptions{})
		}
	default:
		s := &corev1.Secret{ObjectMeta: meta, Data: map[string][]byte{"v": []byte(value)}}
		if precondition == "" {
			got, err = c.cs.CoreV1().Secrets(c.ns).Create(ctx, s, metav1.CreateOptions{})
		} else {
			got, err = c.cs.CoreV1().Secrets(c.ns).Update(ctx, s, metav1.UpdateOptions{})
		}
	}
	if err != nil {
		return "", err
	}
	return got.GetResourceVersion(), nil
}

func (c *client) delete(ctx context.Context, o *object, precondition string) error {
	opts := metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &precondition}}
	if o.Kind == ConfigMap {
		return c.cs.CoreV1().ConfigMaps(c.ns).Delete(ctx, o.Name, opts)
	}
	return c.cs.CoreV1().Secrets(c.ns).Delete(ctx, o.Name, opts)
}

// settle records an operation's outcome on o: acknowledged, the new state is known; refused,
// the old one stays but is read again (a refusal of a precondition this client set means the
// object is not as acknowledged); maybe applied, either state may hold until read again.
func (c *client) settle(o *object, err error, next *State, op workload.Op) {
	c.mu.Lock()
	defer c.mu.Unlock()
	op.End = time.Now()
	preconditionFailed := apierrors.IsConflict(err) || apierrors.IsNotFound(err) || apierrors.IsAlreadyExists(err)
	switch {
	case err == nil:
		c.counts.Acked++
		op.Outcome = workload.OK
		if next != nil {
			c.sawWrite(o, next.RV)
			op.Succeeded, op.Revision = true, revision(next.RV)
		} else {
			// A delete's answer carries no revision; it took one above all this client saw.
			c.maxRV++
			op.Deleted, op.Revision, op.RevisionAtLeast = 1, c.maxRV, true
		}
		o.Known, o.Candidates = next, nil
	case refused(err):
		c.counts.Failed++
		op.Outcome, op.Err = workload.Failed, err.Error()
		if preconditionFailed {
			o.Candidates = []*State{o.Known}
			if op.Kind == workload.CompareAndSwap { // answered: the comparison failed
				op.Outcome, op.Succeeded, op.Revision, op.RevisionAtLeast = workload.OK, false, c.maxRV, true
			}
		}
	default:
		c.counts.Indeterminate++
		op.Outcome, op.Err = workload.Indeterminate, err.Error()
		o.Candidates = []*State{o.Known, next}
	}
	c.ops = append(c.ops, op)
}

// refused: the apiserver answered that it did not apply the operation.
func refused(err error) bool {
	return apierrors.IsConflict(err) || apierrors.IsNotFound(err) || apierrors.IsAlreadyExists(err) ||
		apierrors.IsTooManyRequests(err) || apierrors.IsBadRequest(err) || apierrors.IsInvalid(err) ||
		apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err)
}

// sawWrite checks that a write's resourceVersion is above every one this client saw before:
// etcd's revision only grows, so a lower one means the data went back in time.
func (c *client) sawWrite(o *object, rv string) {
	n, err := strconv.ParseInt(rv, 10, 64)
	if err != nil {
		return
	}
	if n <= c.maxRV {
		c.violations = append(c.violations, Violation{
			Kind: RevisionBackwards, Object: o.String(), Client: c.id,
			Expected: fmt.Sprintf("resourceVersion above %d", c.maxRV), Seen: rv,
		})
	}
	c.maxRV = max(c.maxRV, n)
}

// resolve reads o (a quorum read through the client's apiserver) and checks it is in one of
// the states it may be in.
func (c *client) resolve(ctx context.Context, o *object) {
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	start := time.Now()
	seen, err := c.get(rctx, o)
	if err != nil {
		return // still unknown: tried again at its next turn
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	// A GET through the apiserver returns the object's mod revision, not the cluster's: the
	// revision recorded is what this client knew at least.
	read := workload.Op{Client: c.id, Kind: workload.Get, Key: o.String(), Start: start, End: time.Now(), Outcome: workload.OK, Found: seen != nil}
	if seen != nil {
		read.ReadValue, read.ModRevision = seen.Data, revision(seen.RV)
	}
	if !o.mayBe(seen) {
		c.violations = append(c.violations, Violation{Kind: Lost, Object: o.String(), Client: c.id, Expected: o.expected(), Seen: seen.String()})
	}
	if seen != nil {
		c.maxRV = max(c.maxRV, revision(seen.RV))
	}
	read.Revision, read.RevisionAtLeast = c.maxRV, true
	c.ops = append(c.ops, read)
	o.Known, o.Candidates = seen, nil
}

// get reads o through the apiserver; nil when it does not exist.
func (c *client) get(ctx context.Context, o *object) (*State, error) {
	var err error
	var st State
	if o.Kind == ConfigMap {
		var cm *corev1.ConfigMap
		if cm, err = c.cs.CoreV1().ConfigMaps(c.ns).Get(ctx, o.Name, metav1.GetOptions{}); err == nil {
			st = State{Data: cm.Data["v"], RV: cm.ResourceVersion}
		}
	} else {
		var s *corev1.Secret
		if s, err = c.cs.CoreV1().Secrets(c.ns).Get(ctx, o.Name, metav1.GetOptions{}); err == nil {
			st = State{Data: string(s.Data["v"]), RV: s.ResourceVersion}
		}
	}
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &st, nil
}

// resolveAll resolves every uncertain object, retrying until ctx ends.
func (c *client) resolveAll(ctx context.Context) error {
	for _, o := range c.objects {
		for o.uncertain() {
			c.resolve(ctx, o)
			if o.uncertain() {
				select {
				case <-ctx.Done():
					return fmt.Errorf("%s stayed unreadable: %w", o, ctx.Err())
				case <-time.After(200 * time.Millisecond):
				}
			}
		}
	}
	return nil
}
