package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"go.etcd.io/etcd/api/v3/version"
)

// ServedVersions is what a member serves on its client URL's /version: its server version and
// the cluster version, which is "not_decided" until its cluster has decided it (etcd v3.5
// refuses a joining member then). A member answers only once it has joined its cluster.
func ServedVersions(ctx context.Context, hc *http.Client, clientURL string) (*version.Versions, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(clientURL, "/")+"/version", nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s/version: %s", clientURL, resp.Status)
	}
	var v version.Versions
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		return nil, fmt.Errorf("%s/version: %w", clientURL, err)
	}
	return &v, nil
}

// Decided reports whether v names a decided cluster version.
func Decided(v *version.Versions) bool {
	return v != nil && v.Cluster != "" && v.Cluster != "not_decided"
}
