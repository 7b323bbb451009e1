package datadir

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"testing"

	"google.golang.org/protobuf/proto"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/server/v3/etcdserver/api/snap/snappb"
	"go.etcd.io/etcd/server/v3/storage/wal/walpb"
	"go.etcd.io/raft/v3/raftpb"
)

// Every reader of bytes from disk is fuzzed: whatever the bytes, it returns a value or an
// error, never panics, never loops.

// walFrame encodes one record the way etcd's WAL encoder does (8-byte length, 8-byte padding).
func walFrame(typ int64, data []byte, prevCRC uint32) ([]byte, uint32) {
	crc := prevCRC
	if typ != recordCRC {
		crc = crc32.Update(prevCRC, crcTable, data)
	}
	rec := &walpb.Record{Type: proto.Int64(typ), Crc: proto.Uint32(crc), Data: data}
	b, _ := proto.Marshal(rec)
	pad := (8 - len(b)%8) % 8
	lenField := uint64(len(b))
	if pad != 0 {
		lenField |= uint64(0x80|pad) << 56
	}
	out := binary.LittleEndian.AppendUint64(nil, lenField)
	out = append(out, b...)
	return append(out, make([]byte, pad)...), crc
}

func seedWAL() []byte {
	var buf []byte
	frame, crc := walFrame(recordCRC, nil, 0)
	buf = append(buf, frame...)
	md, _ := proto.Marshal(&etcdserverpb.Metadata{NodeID: proto.Uint64(1), ClusterID: proto.Uint64(2)})
	frame, crc = walFrame(recordMetadata, md, crc)
	buf = append(buf, frame...)
	ctx := []byte(`{"id":1,"peerURLs":["http://127.0.0.1:2380"],"name":"m1"}`)
	cc, _ := proto.Marshal(&raftpb.ConfChange{Type: raftpb.ConfChangeAddNode.Enum(), NodeId: proto.Uint64(1), Context: ctx})
	ent, _ := proto.Marshal(&raftpb.Entry{Term: proto.Uint64(1), Index: proto.Uint64(1), Type: raftpb.EntryConfChange.Enum(), Data: cc})
	frame, crc = walFrame(recordEntry, ent, crc)
	buf = append(buf, frame...)
	hs, _ := proto.Marshal(&raftpb.HardState{Term: proto.Uint64(1), Commit: proto.Uint64(1)})
	frame, _ = walFrame(recordState, hs, crc)
	return append(buf, frame...)
}

// seedWALBig adds a large normal entry (skimmed when not the last record) and a small one after it.
func seedWALBig() []byte {
	b := seedWAL()
	crc := uint32(0)
	w := &walReader{src: bytes.NewReader(b), size: int64(len(b)), full: true}
	for {
		if _, err := w.next(); err != nil {
			break
		}
	}
	crc = w.crc
	for i, size := range []int{100 << 10, 10} {
		ent, _ := proto.Marshal(&raftpb.Entry{Term: proto.Uint64(1), Index: proto.Uint64(uint64(2 + i)), Type: raftpb.EntryNormal.Enum(), Data: make([]byte, size)})
		var frame []byte
		frame, crc = walFrame(recordEntry, ent, crc)
		b = append(b, frame...)
	}
	return b
}

func FuzzWALRecords(f *testing.F) {
	f.Add(seedWAL())
	f.Add(seedWALBig())
	f.Add([]byte{})
	f.Add(make([]byte, 64))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 1, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		w := &walReader{src: bytes.NewReader(b), name: "fuzz.wal", size: int64(len(b)), last: fuzzLast(b)}
		st := &walState{}
		for i := 0; i <= len(b)/8+1; i++ { // each record consumes at least 8 bytes
			rec, err := w.next()
			if err != nil {
				return
			}
			if rec.Type == recordEntry {
				_ = st.addEntry(rec)
			}
		}
		t.Fatalf("reader did not stop on %d bytes", len(b))
	})
}

func FuzzEntryPayloads(f *testing.F) {
	attr, _ := proto.Marshal(&etcdserverpb.InternalRaftRequest{ID: 7})
	f.Add(attr)
	f.Add([]byte(`{"id":1,"isPromote":true}`))
	f.Add([]byte{0x12, 0x03, 'P', 'U', 'T'})
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = decodeConfChange(1, 1, b)
		_, _ = decodeAttributeChange(1, 1, b)
		_ = decodeV2AttributePut(1, 1, b)
	})
}

func FuzzSnapFile(f *testing.F) {
	v2 := []byte(`{"Root":{"Path":"/","Children":{"0":{"Path":"/0","Children":{"members":{"Path":"/0/members","Children":{"1":{"Path":"/0/members/1","Children":{"raftAttributes":{"Path":"/0/members/1/raftAttributes","Value":"{\"peerURLs\":[\"http://a:2380\"]}"}}}}}}}}}}`)
	rs, _ := proto.Marshal(&raftpb.Snapshot{Data: v2, Metadata: &raftpb.SnapshotMetadata{Index: proto.Uint64(5), Term: proto.Uint64(2)}})
	sp, _ := proto.Marshal(&snappb.Snapshot{Crc: proto.Uint32(crc32.Checksum(rs, crcTable)), Data: rs})
	f.Add(sp)
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		s, _, err := decodeSnap(b, "fuzz.snap", int64(len(b)))
		if err == nil {
			_, _ = parseV2Store(s.GetData())
		}
	})
}

func FuzzV2Store(f *testing.F) {
	f.Add([]byte(`{"Root":{"Children":{"0":{"Children":{"members":{"Children":{"zz":{}}}}}}}}`))
	f.Add([]byte(`{"Root":{"Children":{"1":{"Children":{"a":{"Value":"x"}}}}}}`))
	f.Add([]byte(`{"Root":{"Children":{"0":{"Children":{"members":{"Children":{"1":null}}}}}}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = parseV2Store(b)
	})
}

func FuzzBboltMeta(f *testing.F) {
	page := make([]byte, 4096)
	le := binary.LittleEndian
	m := page[bboltPageHeader:]
	le.PutUint32(m[0:], bboltMagic)
	le.PutUint32(m[4:], bboltVersion)
	le.PutUint32(m[8:], 4096)
	le.PutUint64(m[16:], 3)
	le.PutUint64(m[40:], 4)
	f.Add(page, int64(16384))
	f.Add([]byte{}, int64(0))
	f.Fuzz(func(t *testing.T, b []byte, size int64) {
		_, _ = readBboltMeta(bytes.NewReader(b), size)
	})
}

func FuzzPDJoin(f *testing.F) {
	f.Add("pd-0=http://a:2380,pd-1=http://b:2380")
	f.Add("=,,=")
	f.Fuzz(func(t *testing.T, s string) {
		for _, m := range parseInitialCluster(s) {
			_ = m.Name + m.PeerURL
		}
	})
}

// A large entry is skimmed (its payload not read) unless it is the newest segment's last
// record; either way its index and term count.
func TestLargeEntriesAreSkimmedButCounted(t *testing.T) {
	t.Parallel()
	b := seedWALBig()
	for _, last := range []bool{true, false} {
		w := &walReader{src: bytes.NewReader(b), size: int64(len(b)), last: last}
		st := &walState{}
		skimmed := 0
		for i := 0; i < 10; i++ {
			rec, err := w.next()
			if err != nil {
				break
			}
			if rec.Skipped {
				skimmed++
			}
			if rec.Type == recordEntry {
				if err := st.addEntry(rec); err != nil {
					t.Fatal(err)
				}
			}
		}
		if skimmed != 1 || st.LastIndex != 3 || st.Entries != 3 {
			t.Fatalf("last=%v: skimmed %d, last index %d, entries %d", last, skimmed, st.LastIndex, st.Entries)
		}
	}
}

// The seed WAL decodes into the expected member: the fuzz seeds are real frames.
func TestSeedWALDecodes(t *testing.T) {
	t.Parallel()
	b := seedWAL()
	w := &walReader{src: bytes.NewReader(b), name: "seed.wal", size: int64(len(b)), last: true}
	st := &walState{}
	n := 0
	for ; n < 10; n++ {
		rec, err := w.next()
		if err != nil {
			break
		}
		if rec.Type == recordEntry {
			if err := st.addEntry(rec); err != nil {
				t.Fatal(err)
			}
		}
	}
	if n != 4 || len(st.Changes) != 1 || st.Changes[0].Kind != ChangeAdd || st.LastIndex != 1 {
		t.Fatalf("decoded %d records, changes %+v", n, st.Changes)
	}
}

// fuzzLast varies whether the bytes are read as the newest segment (full tail checks) or an
// older one (large payloads skimmed).
func fuzzLast(b []byte) bool { return len(b)%2 == 0 }
