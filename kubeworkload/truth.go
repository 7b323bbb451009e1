package kubeworkload

import (
	"context"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/scheme"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// readTruth reads the workload's objects straight from etcd, under the keys the apiserver keeps
// them at (/registry/configmaps/NS/NAME, /registry/secrets/NS/NAME), past every apiserver's
// cache: what an apiserver started now would list. An object's resourceVersion is its key's
// mod revision.
func readTruth(ctx context.Context, cli *clientv3.Client, ns string) (map[string]*State, int64, error) {
	out := map[string]*State{}
	var revision int64
	decode := scheme.Codecs.UniversalDeserializer()
	for _, k := range []struct {
		kind     Kind
		resource string
	}{{ConfigMap, "configmaps"}, {Secret, "secrets"}} {
		prefix := fmt.Sprintf("/registry/%s/%s/", k.resource, ns)
		resp, err := cli.Get(ctx, prefix, clientv3.WithPrefix())
		if err != nil {
			return nil, 0, fmt.Errorf("read %s from etcd: %w", prefix, err)
		}
		revision = max(revision, resp.Header.Revision)
		for _, kv := range resp.Kvs {
			obj, _, err := decode.Decode(kv.Value, nil, nil)
			if err != nil {
				return nil, 0, fmt.Errorf("decode %s: %w", kv.Key, err)
			}
			st := &State{RV: strconv.FormatInt(kv.ModRevision, 10)}
			var name string
			switch o := obj.(type) {
			case *corev1.ConfigMap:
				name, st.Data = o.Name, o.Data["v"]
			case *corev1.Secret:
				name, st.Data = o.Name, string(o.Data["v"])
			default:
				return nil, 0, fmt.Errorf("%s holds a %T", kv.Key, obj)
			}
			out[string(k.kind)+"/"+name] = st
		}
	}
	return out, revision, nil
}
