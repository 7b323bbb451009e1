package etcdtest

import (
	"crypto/tls"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
)

// newClient dials endpoints of c, over TLS with the client cert when c has TLS.
func (c *Cluster) newClient(endpoints []string) (*clientv3.Client, error) {
	return dial(endpoints, c.clientTLS)
}

// dial connects to endpoints with a short reconnect backoff: gRPC's default grows to two
// minutes, and a test restarts members far more often than that. Each attempt may take 5 s: a
// TLS handshake by a -race test binary on a saturated machine can take more than a second, and
// with 1 s every attempt gave up half-way (the member logged "connection reset by peer") for
// half a minute, until a cluster's start timed out (seen once, two TLS tests at the same moment).
// tlsConfig nil means plain.
func dial(endpoints []string, tlsConfig *tls.Config) (*clientv3.Client, error) {
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   endpoints,
		TLS:         tlsConfig,
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithConnectParams(grpc.ConnectParams{
			Backoff: backoff.Config{
				BaseDelay:  100 * time.Millisecond,
				Multiplier: 1.6,
				Jitter:     0.2,
				MaxDelay:   time.Second,
			},
			MinConnectTimeout: 5 * time.Second,
		})},
	})
	if err != nil {
		return nil, fmt.Errorf("etcd client for %v: %w", endpoints, err)
	}
	return cli, nil
}
