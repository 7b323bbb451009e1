package datadir

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/etcdmedic/etcdmedic"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"go.etcd.io/etcd/api/v3/membershippb"
	"go.etcd.io/raft/v3/raftpb"
)

// MembershipChange is one membership-changing raft entry found in the WAL.
type MembershipChange struct {
	Index  uint64           `json:"index"`
	Term   uint64           `json:"term"`
	Kind   string           `json:"kind"` // add, add-learner, promote, remove, update-peer-urls, set-attributes
	Member etcdmedic.Member `json:"member"`
}

// Change kinds, as an operator would name them.
const (
	ChangeAdd           = "add"
	ChangeAddLearner    = "add-learner"
	ChangePromote       = "promote"
	ChangeRemove        = "remove"
	ChangeUpdatePeers   = "update-peer-urls"
	ChangeSetAttributes = "set-attributes"
)

// confChangeContext is the JSON etcd puts in a ConfChange's Context
// (etcdserver/api/membership.ConfigChangeContext: a Member plus isPromote).
type confChangeContext struct {
	ID         uint64   `json:"id"`
	PeerURLs   []string `json:"peerURLs"`
	IsLearner  bool     `json:"isLearner"`
	Name       string   `json:"name"`
	ClientURLs []string `json:"clientURLs"`
	IsPromote  bool     `json:"isPromote"`
}

// decodeConfChange turns a ConfChange entry into the membership change etcd applies for it.
func decodeConfChange(index, term uint64, data []byte) (*MembershipChange, error) {
	var cc raftpb.ConfChange
	if err := proto.Unmarshal(data, &cc); err != nil {
		return nil, fmt.Errorf("entry %d: ConfChange does not decode: %w", index, err)
	}
	ch := &MembershipChange{Index: index, Term: term, Member: etcdmedic.Member{ID: etcdmedic.ID(cc.GetNodeId())}}
	var ctx confChangeContext
	if len(cc.Context) > 0 && cc.GetType() != raftpb.ConfChangeRemoveNode {
		if err := json.Unmarshal(cc.Context, &ctx); err != nil {
			return nil, fmt.Errorf("entry %d: ConfChange context is not member JSON: %w", index, err)
		}
		ch.Member.PeerURLs, ch.Member.IsLearner = ctx.PeerURLs, ctx.IsLearner
		ch.Member.Name, ch.Member.ClientURLs = ctx.Name, ctx.ClientURLs
	}
	switch cc.GetType() {
	case raftpb.ConfChangeAddNode:
		ch.Kind = ChangeAdd
		if ctx.IsPromote {
			ch.Kind = ChangePromote
		}
	case raftpb.ConfChangeAddLearnerNode:
		ch.Kind = ChangeAddLearner
		ch.Member.IsLearner = true
	case raftpb.ConfChangeRemoveNode:
		ch.Kind = ChangeRemove
	case raftpb.ConfChangeUpdateNode:
		ch.Kind = ChangeUpdatePeers
	default:
		return nil, nil
	}
	return ch, nil
}

// Field numbers of etcdserverpb.InternalRaftRequest and the v2 etcdserverpb.Request that carry
// membership attributes. Only these are decoded; every other request (puts, txns, leases) is
// skipped without parsing its payload.
const (
	internalFieldV2            = 2
	internalFieldMemberAttrSet = 1301
	v2FieldMethod              = 2
	v2FieldPath                = 3
	v2FieldVal                 = 4
)

// decodeAttributeChange finds a "publish my name and client URLs" request in a normal entry:
// ClusterMemberAttrSet (etcd 3.5+) or a v2 PUT of /0/members/<id>/attributes (older members).
func decodeAttributeChange(index, term uint64, data []byte) (*MembershipChange, error) {
	var attrSet, nested, method, path []byte
	err := scanFields(data, func(num protowire.Number, typ protowire.Type, val []byte) {
		if typ != protowire.BytesType {
			return
		}
		switch num {
		case internalFieldMemberAttrSet:
			attrSet = val
		case internalFieldV2: // InternalRaftRequest.V2, or a bare v2 Request's Method
			nested, method = val, val
		case v2FieldPath:
			path = val
		}
	})
	if err != nil {
		return nil, nil
	}
	if attrSet != nil {
		var req membershippb.ClusterMemberAttrSetRequest
		if err := proto.Unmarshal(attrSet, &req); err != nil {
			return nil, fmt.Errorf("entry %d: ClusterMemberAttrSet does not decode: %w", index, err)
		}
		return &MembershipChange{Index: index, Term: term, Kind: ChangeSetAttributes, Member: etcdmedic.Member{
			ID: etcdmedic.ID(req.GetMember_ID()), Name: req.GetMemberAttributes().GetName(), ClientURLs: req.GetMemberAttributes().GetClientUrls(),
		}}, nil
	}
	// Members older than 3.5 wrote bare v2 requests; v3.5 wraps them in InternalRaftRequest.V2.
	// Only these shapes are parsed further: a put never is.
	if string(method) == "PUT" && strings.HasPrefix(string(path), "/0/members/") {
		return decodeV2AttributePut(index, term, data), nil
	}
	if nested != nil && len(nested) < 4096 && strings.Contains(string(nested), "/0/members/") {
		return decodeV2AttributePut(index, term, nested), nil
	}
	return nil, nil
}

// decodeV2AttributePut reads a v2 etcdserverpb.Request and returns the attribute change if it
// is a PUT of /0/members/<id>/attributes.
func decodeV2AttributePut(index, term uint64, data []byte) *MembershipChange {
	var method, path, val string
	if err := scanFields(data, func(num protowire.Number, typ protowire.Type, v []byte) {
		if typ != protowire.BytesType {
			return
		}
		switch num {
		case v2FieldMethod:
			method = string(v)
		case v2FieldPath:
			path = string(v)
		case v2FieldVal:
			val = string(v)
		}
	}); err != nil || method != "PUT" {
		return nil
	}
	rest, ok := strings.CutPrefix(path, "/0/members/")
	if !ok {
		return nil
	}
	idHex, ok := strings.CutSuffix(rest, "/attributes")
	if !ok {
		return nil
	}
	id, err := etcdmedic.ParseID(idHex)
	if err != nil {
		return nil
	}
	var attrs v2Attributes
	if json.Unmarshal([]byte(val), &attrs) != nil {
		return nil
	}
	return &MembershipChange{Index: index, Term: term, Kind: ChangeSetAttributes, Member: etcdmedic.Member{ID: id, Name: attrs.Name, ClientURLs: attrs.ClientURLs}}
}

// scanFields walks the top-level fields of a protobuf message without decoding nested ones.
func scanFields(b []byte, fn func(num protowire.Number, typ protowire.Type, val []byte)) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		m := protowire.ConsumeFieldValue(num, typ, b)
		if m < 0 {
			return protowire.ParseError(m)
		}
		if typ == protowire.BytesType {
			v, k := protowire.ConsumeBytes(b)
			if k < 0 {
				return protowire.ParseError(k)
			}
			fn(num, typ, v)
		} else {
			fn(num, typ, nil)
		}
		b = b[m:]
	}
	return nil
}
