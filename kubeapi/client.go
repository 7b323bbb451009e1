package kubeapi

import (
	"context"
	"fmt"
	"os"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// RESTConfig connects to the apiserver at url as the admin. The serving certificate is the
// self-signed one the apiserver generated, so it is not verified (127.0.0.1 only).
func RESTConfig(url string, c *Credentials) *rest.Config {
	return &rest.Config{
		Host:            url,
		BearerToken:     c.Token,
		TLSClientConfig: rest.TLSClientConfig{Insecure: true},
		QPS:             -1, // no client-side rate limit: the workload sets its own pace
		Timeout:         5 * time.Second,
	}
}

// Clientset is a client-go clientset for the apiserver at url.
func Clientset(url string, c *Credentials) (*kubernetes.Clientset, error) {
	return kubernetes.NewForConfig(RESTConfig(url, c))
}

// WriteKubeconfig writes a kubeconfig with one context per apiserver (named after its member),
// the first one current, as kubeadm's admin.conf on each master.
func WriteKubeconfig(path string, servers []Server, c *Credentials) error {
	if len(servers) == 0 {
		return fmt.Errorf("no apiserver to write a kubeconfig for")
	}
	cfg := clientcmdapi.NewConfig()
	cfg.AuthInfos[AdminUser] = &clientcmdapi.AuthInfo{Token: c.Token}
	for _, s := range servers {
		cfg.Clusters[s.Name] = &clientcmdapi.Cluster{Server: s.URL, InsecureSkipTLSVerify: true}
		cfg.Contexts[s.Name] = &clientcmdapi.Context{Cluster: s.Name, AuthInfo: AdminUser, Namespace: "default"}
	}
	cfg.CurrentContext = servers[0].Name
	b, err := clientcmd.Write(*cfg)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o600)
}

// Ready reports whether the apiserver at url says it is ready (GET /readyz: its etcd answers,
// its informers synced, its post-start hooks done), with what it said when it is not.
func Ready(ctx context.Context, url string, c *Credentials) error {
	cs, err := Clientset(url, c)
	if err != nil {
		return err
	}
	body, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
	if err != nil {
		return fmt.Errorf("%s/readyz: %v %s", url, err, body)
	}
	return nil
}

// WaitReady waits until the apiserver at url is ready, and returns how long that took.
func WaitReady(ctx context.Context, url string, c *Credentials, timeout time.Duration) (time.Duration, error) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		rctx, rcancel := context.WithTimeout(ctx, 2*time.Second)
		err := Ready(rctx, url, c)
		rcancel()
		if err == nil {
			return time.Since(start), nil
		}
		select {
		case <-ctx.Done():
			return time.Since(start), fmt.Errorf("apiserver %s not ready after %s: %v", url, timeout, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}
