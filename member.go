package etcdmedic

// Member is one member record, as a member list returns it and as both of etcd's membership
// stores on disk keep it.
type Member struct {
	ID         ID     `json:"id"`
	Name       string `json:"name"`
	PeerURLs   URLs   `json:"peerURLs"`
	ClientURLs URLs   `json:"clientURLs"`
	IsLearner  bool   `json:"isLearner"`
}

// Label names a member for an operator: "m1 (8e9e05c52164694d)", or the ID alone for a
// member that never started (etcd learns a name only when the member publishes it).
func (m Member) Label() string {
	if m.Name == "" {
		return m.ID.String()
	}
	return m.Name + " (" + m.ID.String() + ")"
}

// ShortLabel is the member's name, or its ID when it has none: for tables, where the ID has
// its own column.
func (m Member) ShortLabel() string {
	if m.Name == "" {
		return m.ID.String()
	}
	return m.Name
}

// Is reports whether nameOrID names this member: its name, or its ID in hex.
func (m Member) Is(nameOrID string) bool {
	if nameOrID == "" {
		return false
	}
	if m.Name == nameOrID {
		return true
	}
	id, err := ParseID(nameOrID)
	return err == nil && id == m.ID
}

// Find returns the member with id from a list, or nil.
func Find(ms []Member, id ID) *Member {
	for i := range ms {
		if ms[i].ID == id {
			return &ms[i]
		}
	}
	return nil
}
