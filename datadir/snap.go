package datadir

import (
	"encoding/json"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/etcdmedic/etcdmedic"

	"google.golang.org/protobuf/proto"

	"go.etcd.io/etcd/server/v3/etcdserver/api/snap/snappb"
	"go.etcd.io/raft/v3/raftpb"
)

// maxSnapBytes bounds a .snap file we are willing to load: it holds the v2 store only, which
// is kilobytes for a v3 cluster (custom v2 data can make it larger).
const maxSnapBytes = 512 << 20

// Snapshot describes the raft snapshot a member would restart from.
type Snapshot struct {
	File      string    `json:"file"`
	Index     uint64    `json:"index"`
	Term      uint64    `json:"term"`
	ConfState ConfState `json:"confState"`
	Bytes     int64     `json:"bytes"`
}

// snapFile is one member/snap/<term>-<index>.snap.
type snapFile struct {
	Name        string
	Term, Index uint64
}

// listSnapFiles returns the .snap files, newest first, and the names of backends received from
// a leader but not yet applied (<index>.snap.db).
func listSnapFiles(dir string) ([]snapFile, []string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, err
	}
	var snaps []snapFile
	var pendingDBs []string
	for _, e := range ents {
		name := e.Name()
		switch {
		case strings.HasSuffix(name, ".snap.db"):
			pendingDBs = append(pendingDBs, name)
		case strings.HasSuffix(name, ".snap"):
			var term, index uint64
			if _, err := fmt.Sscanf(name, "%016x-%016x.snap", &term, &index); err != nil {
				continue // etcd ignores (and renames to .broken) what it cannot parse
			}
			snaps = append(snaps, snapFile{Name: name, Term: term, Index: index})
		}
	}
	sort.Slice(snaps, func(i, j int) bool { return snaps[i].Index > snaps[j].Index })
	return snaps, pendingDBs, nil
}

// readSnapFile loads and CRC-checks one .snap file.
func readSnapFile(path string) (*raftpb.Snapshot, int64, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, 0, err
	}
	if !info.Mode().IsRegular() {
		return nil, 0, fmt.Errorf("snapshot %s is not a regular file", path)
	}
	if info.Size() > maxSnapBytes {
		return nil, 0, fmt.Errorf("snapshot %s is %d bytes, more than the %d etcdmedic reads", path, info.Size(), maxSnapBytes)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, 0, err
	}
	return decodeSnap(b, path, info.Size())
}

func decodeSnap(b []byte, path string, size int64) (*raftpb.Snapshot, int64, error) {
	if len(b) == 0 {
		return nil, 0, fmt.Errorf("snapshot %s is empty", path)
	}
	var sp snappb.Snapshot
	if err := proto.Unmarshal(b, &sp); err != nil {
		return nil, 0, fmt.Errorf("snapshot %s does not decode: %w", path, err)
	}
	if crc32.Checksum(sp.Data, crcTable) != sp.GetCrc() {
		return nil, 0, fmt.Errorf("snapshot %s: CRC mismatch (file damaged)", path)
	}
	var s raftpb.Snapshot
	if err := proto.Unmarshal(sp.Data, &s); err != nil {
		return nil, 0, fmt.Errorf("snapshot %s: raft snapshot does not decode: %w", path, err)
	}
	return &s, size, nil
}

// newestUsableSnapshot picks the snapshot etcd would load at start: the newest .snap whose
// (term, index) the WAL recorded and that is not beyond the commit index
// (etcd's Snapshotter.LoadNewestAvailable over wal.ValidSnapshotEntries).
func newestUsableSnapshot(snapDir string, markers []SnapshotMarker, commit uint64) (*Snapshot, *raftpb.Snapshot, error) {
	snaps, _, err := listSnapFiles(snapDir)
	if err != nil {
		return nil, nil, err
	}
	known := map[SnapshotMarker]bool{}
	for _, m := range markers {
		if m.Index <= commit {
			known[m] = true
		}
	}
	var lastErr error
	var newest *SnapshotMarker
	for _, m := range markers {
		if m.Index > 0 && m.Index <= commit && (newest == nil || m.Index > newest.Index) {
			mm := m
			newest = &mm
		}
	}
	for _, sf := range snaps {
		if !known[SnapshotMarker{Index: sf.Index, Term: sf.Term}] {
			continue
		}
		rs, size, err := readSnapFile(filepath.Join(snapDir, sf.Name))
		if err != nil {
			lastErr = err // etcd falls back to an older snapshot too
			continue
		}
		md := rs.GetMetadata()
		return &Snapshot{File: sf.Name, Index: md.GetIndex(), Term: md.GetTerm(), ConfState: confStateFrom(md.GetConfState()), Bytes: size}, rs, nil
	}
	if lastErr == nil && newest != nil {
		lastErr = fmt.Errorf("the WAL records a snapshot at index %d (term %d) but %016x-%016x.snap is missing: etcd will not start", newest.Index, newest.Term, newest.Term, newest.Index)
	}
	return nil, nil, lastErr
}

// v2Node is the JSON of one node of etcd's v2 store (etcdserver/api/v2store/node.go).
type v2Node struct {
	Path     string
	Value    string
	Children map[string]*v2Node
}

type v2StoreJSON struct {
	Root *v2Node
}

type v2RaftAttributes struct {
	PeerURLs  []string `json:"peerURLs"`
	IsLearner bool     `json:"isLearner"`
}

type v2Attributes struct {
	Name       string   `json:"name"`
	ClientURLs []string `json:"clientURLs"`
}

// v2Membership is membership as etcd's v2 store holds it: authoritative on v3.5, kept in
// sync by v3.6, not loaded by v3.7.
type v2Membership struct {
	Members        map[etcdmedic.ID]*etcdmedic.Member
	Removed        map[etcdmedic.ID]bool
	ClusterVersion string
	// CustomKeys counts v2 keys outside etcd's own /0 (membership) tree: v3.6 refuses to start
	// with them.
	CustomKeys int
}

func newV2Membership() *v2Membership {
	return &v2Membership{Members: map[etcdmedic.ID]*etcdmedic.Member{}, Removed: map[etcdmedic.ID]bool{}}
}

// parseV2Store reads membership out of a v2 store snapshot (the Data of a raft snapshot).
func parseV2Store(data []byte) (*v2Membership, error) {
	m := newV2Membership()
	if len(data) == 0 {
		return m, nil
	}
	var st v2StoreJSON
	if err := json.Unmarshal(data, &st); err != nil {
		return nil, fmt.Errorf("v2 store in snapshot is not JSON: %w", err)
	}
	if st.Root == nil {
		return m, nil
	}
	cluster := st.Root.Children["0"]
	if cluster != nil {
		if v := cluster.Children["version"]; v != nil {
			m.ClusterVersion = v.Value
		}
		if members := cluster.Children["members"]; members != nil {
			for name, node := range members.Children {
				if node == nil {
					continue
				}
				id, err := etcdmedic.ParseID(name)
				if err != nil {
					return nil, fmt.Errorf("v2 store member key %q: %w", name, err)
				}
				mem := &etcdmedic.Member{ID: id}
				if ra := node.Children["raftAttributes"]; ra != nil {
					var v v2RaftAttributes
					if err := json.Unmarshal([]byte(ra.Value), &v); err != nil {
						return nil, fmt.Errorf("v2 store member %s raftAttributes: %w", id, err)
					}
					mem.PeerURLs, mem.IsLearner = v.PeerURLs, v.IsLearner
				}
				if a := node.Children["attributes"]; a != nil {
					var v v2Attributes
					if err := json.Unmarshal([]byte(a.Value), &v); err != nil {
						return nil, fmt.Errorf("v2 store member %s attributes: %w", id, err)
					}
					mem.Name, mem.ClientURLs = v.Name, v.ClientURLs
				}
				m.Members[id] = mem
			}
		}
		if removed := cluster.Children["removed_members"]; removed != nil {
			for name := range removed.Children {
				if id, err := etcdmedic.ParseID(name); err == nil {
					m.Removed[id] = true
				}
			}
		}
	}
	if keys := st.Root.Children["1"]; keys != nil {
		m.CustomKeys = countLeaves(keys, 0)
	}
	return m, nil
}

func countLeaves(n *v2Node, depth int) int {
	if depth > 64 || n == nil {
		return 0
	}
	if len(n.Children) == 0 {
		if n.Value != "" {
			return 1
		}
		return 0
	}
	c := 0
	for _, ch := range n.Children {
		c += countLeaves(ch, depth+1)
	}
	return c
}
