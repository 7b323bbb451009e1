package etcdmedic

import (
	"fmt"
	"strconv"
)

// ID is a member ID. etcd prints IDs in hex (etcdctl -w table, logs, bbolt keys), so etcdmedic
// does too, in tables and in JSON.
type ID uint64

// ClusterID is a cluster's ID, printed like a member ID.
type ClusterID = ID

// NoID is the zero ID: no leader known, no member matched.
const NoID ID = 0

func (id ID) String() string { return strconv.FormatUint(uint64(id), 16) }

// MarshalText writes the ID as etcd prints it, in hex: JSON gets a hex string, as a value and
// as a map key.
func (id ID) MarshalText() ([]byte, error) { return []byte(id.String()), nil }

// UnmarshalText reads the hex MarshalText wrote; an empty string is NoID.
func (id *ID) UnmarshalText(b []byte) error {
	if len(b) == 0 {
		*id = NoID
		return nil
	}
	v, err := ParseID(string(b))
	if err != nil {
		return err
	}
	*id = v
	return nil
}

// ParseID parses a member or cluster ID written in hex, as etcd writes them.
func ParseID(s string) (ID, error) {
	v, err := strconv.ParseUint(s, 16, 64)
	if err != nil {
		return 0, fmt.Errorf("parse ID %q: want hex such as 8e9e05c52164694d", s)
	}
	return ID(v), nil
}

// MustParseID is ParseID for IDs written in code (tables of tests): it panics on bad hex.
func MustParseID(s string) ID {
	id, err := ParseID(s)
	if err != nil {
		panic(err)
	}
	return id
}
