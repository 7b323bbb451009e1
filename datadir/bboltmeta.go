package datadir

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
)

// bbolt's on-disk meta page (go.etcd.io/bbolt internal/common/meta.go, page.go). etcdmedic
// reads it itself before handing the file to bbolt: a truncated or zeroed file must get a
// clear error, not a fault from touching pages past the end of a mapping.
const (
	bboltMagic       = 0xED0CDAED
	bboltVersion     = 2
	bboltPageHeader  = 16
	bboltMetaBytes   = 64 // magic .. checksum
	bboltMetaSumSpan = 56 // bytes covered by the checksum
	maxPageSize      = 64 << 10
)

// bboltMeta is the newest valid meta page of a bbolt file.
type bboltMeta struct {
	PageSize uint32
	Root     uint64
	Freelist uint64
	HighPage uint64 // first page never allocated: the db's logical size in pages
	TxID     uint64
}

// readBboltMeta reads both meta pages and returns the valid one with the highest txid.
func readBboltMeta(f io.ReaderAt, fileSize int64) (*bboltMeta, error) {
	if fileSize == 0 {
		return nil, errors.New("db file is empty (0 bytes)")
	}
	first := make([]byte, 4096)
	n, err := f.ReadAt(first, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("read db meta page: %w", err)
	}
	m0, err0 := parseBboltMeta(first[:n])
	pageSize := uint32(4096)
	if err0 == nil {
		pageSize = m0.PageSize
	}
	second := make([]byte, bboltPageHeader+bboltMetaBytes)
	n, err = f.ReadAt(second, int64(pageSize))
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("read db meta page: %w", err)
	}
	m1, err1 := parseBboltMeta(second[:n])
	var best *bboltMeta
	switch {
	case err0 == nil && err1 == nil:
		best = m0
		if m1.TxID > m0.TxID {
			best = m1
		}
	case err0 == nil:
		best = m0
	case err1 == nil:
		best = m1
	default:
		return nil, fmt.Errorf("neither bbolt meta page is valid (%v; %v): not a bbolt file, or zeroed", err0, err1)
	}
	if fileSize < 0 || best.HighPage > uint64(fileSize)/uint64(best.PageSize) {
		return nil, fmt.Errorf("db file is truncated: meta page says %d pages of %d bytes, file has %d bytes", best.HighPage, best.PageSize, fileSize)
	}
	if best.Root >= best.HighPage {
		return nil, fmt.Errorf("db meta page points its root bucket at page %d, past the last page %d", best.Root, best.HighPage)
	}
	return best, nil
}

func parseBboltMeta(b []byte) (*bboltMeta, error) {
	if len(b) < bboltPageHeader+bboltMetaBytes {
		return nil, errors.New("meta page cut short")
	}
	m := b[bboltPageHeader : bboltPageHeader+bboltMetaBytes]
	le := binary.LittleEndian
	if le.Uint32(m[0:]) != bboltMagic {
		return nil, errors.New("bad magic")
	}
	if le.Uint32(m[4:]) != bboltVersion {
		return nil, fmt.Errorf("unsupported bbolt version %d", le.Uint32(m[4:]))
	}
	h := fnv.New64a()
	h.Write(m[:bboltMetaSumSpan])
	if h.Sum64() != le.Uint64(m[56:]) {
		return nil, errors.New("meta checksum mismatch")
	}
	meta := &bboltMeta{
		PageSize: le.Uint32(m[8:]),
		Root:     le.Uint64(m[16:]),
		Freelist: le.Uint64(m[32:]),
		HighPage: le.Uint64(m[40:]),
		TxID:     le.Uint64(m[48:]),
	}
	if meta.PageSize < 512 || meta.PageSize > maxPageSize || meta.PageSize&(meta.PageSize-1) != 0 {
		return nil, fmt.Errorf("implausible page size %d", meta.PageSize)
	}
	return meta, nil
}

func statSize(f *os.File) (int64, error) {
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}
