package drill

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcdmedic/etcdmedic/internal/etcdbin"
	"github.com/etcdmedic/etcdmedic/kubeworkload"
	"github.com/etcdmedic/etcdmedic/sandbox"
)

// KubeChecked is the Kubernetes part of a drill run with --kubernetes: a kube-apiserver beside
// each member, a client-go workload through them, and the check of what they acknowledged.
type KubeChecked struct {
	APIServerVersion string `json:"apiserverVersion"`
	// Outages are the apiservers' longest stretches of not being ready (/readyz), watched four
	// times a second through the whole drill.
	Outages []APIServerOutage    `json:"apiserverOutages"`
	Verdict kubeworkload.Verdict `json:"verdict"`
	Passed  bool                 `json:"passed"`
}

// kube is a drill's Kubernetes: the sandbox's apiservers and the workload through them.
type kube struct {
	sb    *sandbox.Sandbox
	w     *kubeworkload.Workload
	ready *readiness
	// restoredOlder: the cluster was restored to a point before the end (total loss), so
	// what was acknowledged after it is not checked; the rest is.
	restoredOlder bool
}

// stop stops the workload and the readiness watch (a drill that ends early).
func (k *kube) stop() {
	k.w.Stop()
	k.ready.stop()
}

// startKubernetes starts a kube-apiserver beside each member of sb and the Kubernetes
// workload through them, when the drill runs with --kubernetes.
func (r *recorder) startKubernetes(ctx context.Context, env Env, sb *sandbox.Sandbox) error {
	if !env.Kubernetes {
		return nil
	}
	bin, err := r.kubeAPIServer(ctx)
	if err != nil {
		return err
	}
	started := time.Now()
	if err := sb.StartKubernetes(ctx, bin, 2*time.Minute); err != nil {
		return fmt.Errorf("start Kubernetes on the sandbox: %w", err)
	}
	servers := sb.Kubernetes.APIServers
	r.say("Kubernetes: %d kube-apiservers %s ready in %.1fs, each on its own member's etcd (kubeconfig: %s)", len(servers), etcdbin.KubeAPIServerVersion, time.Since(started).Seconds(), sb.Kubernetes.Kubeconfig)
	w, err := kubeworkload.Start(ctx, kubeworkload.Spec{APIServers: servers, Credentials: &sb.Kubernetes.Credentials})
	if err != nil {
		return fmt.Errorf("start the Kubernetes workload: %w", err)
	}
	r.kube = &kube{sb: sb, w: w, ready: watchReadiness(sb, r.start)}
	r.say("Kubernetes workload started: 4 clients creating, updating (with resourceVersion preconditions) and deleting ConfigMaps and Secrets, and informers through every apiserver")
	return nil
}

// kubeAPIServer is the cached kube-apiserver binary, built the first time with a word on it.
func (r *recorder) kubeAPIServer(ctx context.Context) (string, error) {
	v := etcdbin.KubeAPIServerVersion
	if !etcdbin.KubeAPIServerCached(v) {
		dir, _ := etcdbin.CacheDir()
		r.say("building kube-apiserver %s from the Go module proxy (once, about 5 minutes; cached in %s)", v, dir)
	}
	return etcdbin.KubeAPIServerPath(ctx, v)
}

// checkKubernetes waits for every apiserver to be ready again and checks the Kubernetes
// workload against the repaired cluster.
func (r *recorder) checkKubernetes(ctx context.Context, endpoints []string) error {
	if r.kube == nil {
		return nil
	}
	kc := &KubeChecked{APIServerVersion: etcdbin.KubeAPIServerVersion}
	r.result.Kubernetes = kc
	_, err := r.kube.sb.WaitKubernetesReady(ctx, 2*time.Minute)
	kc.Outages = r.kube.ready.stop()
	if err != nil {
		return err
	}
	for _, o := range kc.Outages {
		if o.NotReadySec > 0 {
			r.say("apiserver beside %s: not ready for %.1fs (t+%.1fs to t+%.1fs), ready again", o.APIServer, o.NotReadySec, o.FromSec, o.UntilSec)
		} else {
			r.say("apiserver beside %s: ready throughout", o.APIServer)
		}
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return err
	}
	defer cli.Close()
	v, err := r.kube.w.Verify(ctx, kubeworkload.VerifyOptions{Etcd: cli, SkipAcknowledged: r.kube.restoredOlder})
	if err != nil {
		return fmt.Errorf("check the Kubernetes workload: %w", err)
	}
	kc.Verdict, kc.Passed = v, v.Passed
	r.say("Kubernetes workload: %s", v)
	for _, inf := range v.Informers {
		r.say("  informers through the apiserver beside %s: converged=%v %.1fs after the writes stopped", inf.APIServer, inf.Converged, inf.AfterSec)
	}
	return nil
}
