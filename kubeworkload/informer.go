package kubeworkload

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/etcdmedic/etcdmedic/kubeapi"
)

// informer is a controller's view of the workload's objects through one apiserver: a shared
// informer on ConfigMaps and one on Secrets, as client-go's factories make them.
type informer struct {
	server  string // the apiserver's name (its member's)
	cms     cache.SharedIndexInformer
	secrets cache.SharedIndexInformer
}

func startInformer(ctx context.Context, s kubeapi.Server, spec Spec) (*informer, error) {
	cfg := kubeapi.RESTConfig(s.URL, spec.Credentials)
	cfg.Timeout = 0 // a watch lasts longer than a request
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	f := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(spec.Namespace))
	inf := &informer{server: s.Name, cms: f.Core().V1().ConfigMaps().Informer(), secrets: f.Core().V1().Secrets().Informer()}
	f.Start(ctx.Done())
	return inf, nil
}

func (i *informer) waitSynced(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if !cache.WaitForCacheSync(ctx.Done(), i.cms.HasSynced, i.secrets.HasSynced) {
		return fmt.Errorf("the informers on %s did not sync in %s", i.server, timeout)
	}
	return nil
}

// cached is the informer's cache: each object's resourceVersion by kind/name.
func (i *informer) cached() map[string]string {
	out := map[string]string{}
	for _, o := range i.cms.GetStore().List() {
		cm := o.(*corev1.ConfigMap)
		out[string(ConfigMap)+"/"+cm.Name] = cm.ResourceVersion
	}
	for _, o := range i.secrets.GetStore().List() {
		s := o.(*corev1.Secret)
		out[string(Secret)+"/"+s.Name] = s.ResourceVersion
	}
	return out
}
