package main

import (
	"reflect"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/etcdmedic/etcdmedic/cluster"
)

// An exported but empty ETCDCTL_* variable (a templated env file, `export ETCDCTL_ENDPOINTS=`)
// is unset for etcdctl (SetPflagsFromEnv skips empty values): the default stands, no error.
func TestEmptyEtcdctlVariablesAreUnset(t *testing.T) {
	for _, tc := range []struct {
		situation string
		env       map[string]string
		want      cluster.Conn
	}{
		{"ETCDCTL_ENDPOINTS= keeps the default endpoint", map[string]string{"ETCDCTL_ENDPOINTS": ""}, cluster.DefaultConn()},
		{"ETCDCTL_INSECURE_SKIP_TLS_VERIFY= is not an error", map[string]string{"ETCDCTL_INSECURE_SKIP_TLS_VERIFY": ""}, cluster.DefaultConn()},
		{"ETCDCTL_DIAL_TIMEOUT= keeps the default timeout", map[string]string{"ETCDCTL_DIAL_TIMEOUT": "", "ETCDCTL_COMMAND_TIMEOUT": ""}, cluster.DefaultConn()},
		{"a set variable still counts", map[string]string{"ETCDCTL_ENDPOINTS": "http://10.0.0.1:2379", "ETCDCTL_DIAL_TIMEOUT": "7s"},
			cluster.Conn{Endpoints: []string{"http://10.0.0.1:2379"}, DialTimeout: 7 * time.Second, CommandTimeout: cluster.DefaultConn().CommandTimeout}},
	} {
		t.Run(tc.situation, func(t *testing.T) {
			for _, name := range connFlagNames {
				t.Setenv(cluster.EnvVar(name), "")
			}
			for name, value := range tc.env {
				t.Setenv(name, value)
			}
			var c connFlags
			fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
			c.register(fs)
			if err := c.resolve(fs); err != nil {
				t.Fatalf("resolve: %v", err)
			}
			if !reflect.DeepEqual(c.conn, tc.want) {
				t.Errorf("conn %+v, want %+v", c.conn, tc.want)
			}
		})
	}
}
