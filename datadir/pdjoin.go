package datadir

import (
	"fmt"
	"os"
	"strings"
	"time"
)

// maxJoinBytes bounds the PD join file we read: it holds one initial-cluster string.
const maxJoinBytes = 1 << 20

// PDJoin is the `join` file PD (up to v8.5) writes in its data dir at first join: the
// initial-cluster string it joined with. PD trusts it on every later start.
type PDJoin struct {
	Path     string         `json:"path"`
	Contents string         `json:"contents"`
	Members  []PDJoinMember `json:"members"`
	ModTime  time.Time      `json:"modTime"`
	AgeSec   int64          `json:"ageSeconds"`
}

// PDJoinMember is one name=peerURL pair of a join file.
type PDJoinMember struct {
	Name    string `json:"name"`
	PeerURL string `json:"peerURL"`
}

func readPDJoin(path string, now time.Time) (*PDJoin, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !info.Mode().IsRegular() {
		return nil, fmt.Errorf("PD join file %s is not a regular file", path)
	}
	if info.Size() > maxJoinBytes {
		return nil, fmt.Errorf("PD join file %s is %d bytes: not a join file", path, info.Size())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	j := &PDJoin{Path: path, Contents: strings.TrimSpace(string(b)), ModTime: info.ModTime().UTC(), AgeSec: int64(now.Sub(info.ModTime()).Seconds())}
	j.Members = parseInitialCluster(j.Contents)
	return j, nil
}

// parseInitialCluster splits "a=http://x:2380,b=http://y:2380" into pairs; a malformed pair
// is kept with an empty URL so that it shows up as unknown rather than vanishing.
func parseInitialCluster(s string) []PDJoinMember {
	out := []PDJoinMember{}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		name, url, _ := strings.Cut(part, "=")
		out = append(out, PDJoinMember{Name: name, PeerURL: url})
	}
	return out
}
