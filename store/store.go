// Package store keeps etcdmedic's backups in an object store through gocloud.dev/blob:
// file:///var/backups/etcd (the default kind, needing nothing), s3://bucket/prefix?endpoint=...
// (any S3 server), gs:// and azblob://. Every object is compressed with zstd and, when
// recipients are given, encrypted with age; what is stored is recorded (sizes, the sha256 of
// the plain bytes) so that a reader can check it. An object is visible under its name only once
// it is whole (blob writers commit on Close, and a cancelled write is discarded), and readers
// find backups only through manifests written after their data: a half-uploaded backup is
// never listed.
package store

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"filippo.io/age"
	"github.com/klauspost/compress/zstd"
	"gocloud.dev/blob"
	_ "gocloud.dev/blob/azureblob" // azblob://
	_ "gocloud.dev/blob/fileblob"  // file://
	_ "gocloud.dev/blob/gcsblob"   // gs://
	_ "gocloud.dev/blob/s3blob"    // s3://
	"gocloud.dev/gcerrors"

	"github.com/etcdmedic/etcdmedic/backup"
)

// Options say how objects are sealed.
type Options struct {
	// Recipients are age public keys (age1...): every object is encrypted to all of them.
	Recipients []string
	// IdentityFile holds the age identities (AGE-SECRET-KEY-1...) that open encrypted objects.
	IdentityFile string
	// Create makes a file:// store's folder when it is missing (the commands that write
	// backups); without it a missing folder is an error, so that reading never writes.
	Create bool
}

// Store is an opened object store.
type Store struct {
	URL        string
	bucket     *blob.Bucket
	recipients []age.Recipient
	identities []age.Identity
	// folder is a file:// store's folder (see durable.go); "" for the others.
	folder string
	// durableFolders are the folders under folder whose entries are known synced in their parents.
	durableFolders sync.Map
}

// ErrNotFound is a key with no object.
var ErrNotFound = errors.New("no such object")

// ErrCorrupt is an object whose bytes arrived whole but do not decrypt or decompress: damaged
// in the store, not a store that failed to answer.
var ErrCorrupt = errors.New("the object is damaged")

// Open opens the store at rawURL. A file:// folder is created when missing. The path of an
// s3://, gs:// or azblob:// URL is a prefix inside the bucket.
func Open(ctx context.Context, rawURL string, opts Options) (*Store, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("--store %q: %w", rawURL, err)
	}
	open, folder := rawURL, ""
	switch u.Scheme {
	case "file":
		if u.Path == "" {
			return nil, fmt.Errorf("--store %q: a file:// store needs an absolute folder (file:///var/backups/etcd)", rawURL)
		}
		if st, err := os.Stat(u.Path); err == nil && !st.IsDir() {
			return nil, fmt.Errorf("--store %q: %s is not a folder", rawURL, u.Path)
		} else if err != nil && !opts.Create {
			return nil, fmt.Errorf("--store %q: no store there (%v): backup now or backup run makes one", rawURL, err)
		}
		if err := backup.MkdirAllSynced(u.Path); err != nil {
			return nil, fmt.Errorf("--store %q: %w", rawURL, err)
		}
		folder = filepath.Clean(u.Path)
		q := u.Query()
		q.Set("no_tmp_dir", "true") // temp files beside the objects, then renamed: same filesystem
		// No sidecar attribute files: etcdmedic reads none, and each would be one more file
		// to make durable (a torn one fails the read of its object).
		q.Set("metadata", "skip")
		u.RawQuery = q.Encode()
		open = u.String()
	case "s3", "gs", "azblob":
		if prefix := strings.Trim(u.Path, "/"); prefix != "" {
			q := u.Query()
			q.Set("prefix", prefix+"/")
			u.Path, u.RawQuery = "", q.Encode()
			open = u.String()
		}
	case "":
		return nil, fmt.Errorf("--store %q: give a URL (file:///var/backups/etcd, s3://bucket/prefix?endpoint=...)", rawURL)
	}
	b, err := blob.OpenBucket(ctx, open)
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", rawURL, err)
	}
	s := &Store{URL: rawURL, bucket: b, folder: folder}
	for _, r := range opts.Recipients {
		rec, err := age.ParseX25519Recipient(r)
		if err != nil {
			b.Close()
			return nil, fmt.Errorf("age recipient %q: %w", r, err)
		}
		s.recipients = append(s.recipients, rec)
	}
	if opts.IdentityFile != "" {
		f, err := os.Open(opts.IdentityFile)
		if err != nil {
			b.Close()
			return nil, fmt.Errorf("age identity file: %w", err)
		}
		ids, err := age.ParseIdentities(f)
		f.Close()
		if err != nil {
			b.Close()
			return nil, fmt.Errorf("age identity file %s: %w", opts.IdentityFile, err)
		}
		s.identities = ids
	}
	return s, nil
}

// Close releases the store.
func (s *Store) Close() error { return s.bucket.Close() }

// Written is what Put stored.
type Written struct {
	Key         string `json:"key"`
	Bytes       int64  `json:"bytes"`       // plain bytes read
	StoredBytes int64  `json:"storedBytes"` // bytes in the store, compressed (and encrypted)
	SHA256      string `json:"sha256"`      // of the plain bytes
	Encrypted   bool   `json:"encrypted"`
}

// Put stores what r holds under key, compressed (and encrypted), and commits it only when all
// of r was read and written: an error or a cancelled ctx leaves no object under key. In a
// file:// store the object is durable when Put returns (see syncFile): synced, then renamed,
// then its folder synced.
func (s *Store) Put(ctx context.Context, key string, r io.Reader) (*Written, error) {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var file *os.File // a file:// store's temporary file for the object
	bw, err := s.bucket.NewWriter(wctx, key, &blob.WriterOptions{ContentType: "application/octet-stream", BeforeWrite: func(as func(any) bool) error {
		as(&file)
		return nil
	}})
	if err != nil {
		return nil, fmt.Errorf("store %s: %w", key, err)
	}
	counted := &counter{w: bw}
	var sealed io.WriteCloser = nopCloser{counted}
	if len(s.recipients) > 0 {
		if sealed, err = age.Encrypt(counted, s.recipients...); err != nil {
			cancel()
			bw.Close()
			return nil, err
		}
	}
	// One block at a time, in this goroutine: the encoder never writes to the blob writer
	// behind Put's back (with its own goroutines it raced a failed upload's Close).
	zw, err := zstd.NewWriter(sealed, zstd.WithEncoderConcurrency(1))
	if err != nil {
		cancel()
		bw.Close()
		return nil, err
	}
	h := sha256.New()
	n, err := io.Copy(zw, io.TeeReader(r, h))
	// Always closed, also after an error: it waits for the encoder's own goroutines, which
	// write to the blob writer until then.
	if cerr := zw.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = sealed.Close()
	}
	if err == nil && file != nil {
		err = file.Sync()
	}
	if err != nil {
		cancel() // the writer discards what it has
		bw.Close()
		return nil, fmt.Errorf("store %s: %w", key, err)
	}
	if err := bw.Close(); err != nil {
		return nil, fmt.Errorf("store %s: %w", key, err)
	}
	if err := s.syncFoldersOf(key); err != nil {
		return nil, fmt.Errorf("store %s: %w", key, err)
	}
	return &Written{Key: key, Bytes: n, StoredBytes: counted.n, SHA256: hex.EncodeToString(h.Sum(nil)), Encrypted: len(s.recipients) > 0}, nil
}

// Get opens the object at key, decrypted and decompressed. The caller closes it.
func (s *Store) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	br, err := s.bucket.NewReader(ctx, key, nil)
	if gcerrors.Code(err) == gcerrors.NotFound {
		return nil, fmt.Errorf("%s: %w", key, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", key, err)
	}
	source := &sourceReader{r: br}
	buffered := bufio.NewReader(source)
	var plain io.Reader = buffered
	head, _ := buffered.Peek(len(ageHeader))
	if source.err != nil {
		br.Close()
		return nil, fmt.Errorf("read %s: %w", key, source.err)
	}
	// Put never stores an object that is neither age's nor zstd's (zstd writes a frame even
	// for no bytes at all): anything else, an empty file first of all, is damaged, never a
	// stream that decompresses to nothing.
	if string(head) != ageHeader && !bytes.HasPrefix(head, zstdMagic) {
		br.Close()
		what := "it is neither zstd nor age"
		if len(head) == 0 {
			what = "it is empty (0 bytes)"
		}
		return nil, fmt.Errorf("%s: %w: %s", key, ErrCorrupt, what)
	}
	if string(head) == ageHeader {
		if len(s.identities) == 0 {
			br.Close()
			return nil, fmt.Errorf("%s is encrypted with age: give the identity file that opens it (--age-identity)", key)
		}
		if plain, err = age.Decrypt(buffered, s.identities...); err != nil {
			br.Close()
			return nil, fmt.Errorf("decrypt %s: %w", key, err)
		}
	}
	zr, err := zstd.NewReader(plain)
	if err != nil {
		br.Close()
		return nil, fmt.Errorf("decompress %s: %w", key, err)
	}
	return readCloser{Reader: corruptUnlessSource{key: key, r: zr, source: source}, close: func() error { zr.Close(); return br.Close() }}, nil
}

// sourceReader remembers the error reading the store gave, so that a decoding error above it
// can be told from a store that failed.
type sourceReader struct {
	r   io.Reader
	err error
}

func (s *sourceReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if err != nil && err != io.EOF {
		s.err = err
	}
	return n, err
}

// corruptUnlessSource marks a read error ErrCorrupt when the store itself read fine.
type corruptUnlessSource struct {
	key    string
	r      io.Reader
	source *sourceReader
}

func (c corruptUnlessSource) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if err != nil && err != io.EOF && c.source.err == nil {
		err = fmt.Errorf("%s: %w: %v", c.key, ErrCorrupt, err)
	}
	return n, err
}

const ageHeader = "age-encryption.org/v1"

// zstdMagic begins every zstd frame.
var zstdMagic = []byte{0x28, 0xb5, 0x2f, 0xfd}

type readCloser struct {
	io.Reader
	close func() error
}

func (r readCloser) Close() error { return r.close() }

// PutJSON stores v as JSON under key.
func (s *Store) PutJSON(ctx context.Context, key string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = s.Put(ctx, key, bytes.NewReader(b))
	return err
}

// GetJSON reads the JSON object at key into v.
func (s *Store) GetJSON(ctx context.Context, key string, v any) error {
	r, err := s.Get(ctx, key)
	if err != nil {
		return err
	}
	defer r.Close()
	if err := json.NewDecoder(r).Decode(v); err != nil {
		return fmt.Errorf("%s: %w", key, err)
	}
	return nil
}

// List returns the keys under prefix, in the store's order (lexical). A listing that meets an
// object gone while it was listed (a file:// store lists an upload's temporary file, which the
// upload then renames) is listed again, a few times.
func (s *Store) List(ctx context.Context, prefix string) ([]string, error) {
	for try := 1; ; try++ {
		keys, err := s.listOnce(ctx, prefix)
		if err == nil || gcerrors.Code(err) != gcerrors.NotFound || try == listTries || ctx.Err() != nil {
			return keys, err
		}
		time.Sleep(time.Duration(try) * 5 * time.Millisecond)
	}
}

// listTries is how many times List lists when objects vanish under it (about 2 s in all).
const listTries = 30

func (s *Store) listOnce(ctx context.Context, prefix string) ([]string, error) {
	var keys []string
	it := s.bucket.List(&blob.ListOptions{Prefix: prefix})
	for {
		obj, err := it.Next(ctx)
		if err == io.EOF {
			return keys, nil
		}
		if err != nil {
			return nil, fmt.Errorf("list %s: %w", prefix, err)
		}
		if !obj.IsDir {
			keys = append(keys, obj.Key)
		}
	}
}

// Delete removes the object at key.
func (s *Store) Delete(ctx context.Context, key string) error {
	if err := s.bucket.Delete(ctx, key); err != nil && gcerrors.Code(err) != gcerrors.NotFound {
		return fmt.Errorf("delete %s: %w", key, err)
	}
	return nil
}

type counter struct {
	w io.Writer
	n int64
}

func (c *counter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

// PutRaw uploads the file at path under key as it is (no compression, no encryption), as
// aws s3 cp would: for comparisons (bench backup). Unlike Put, it does not make the object
// durable (no fsync of a file store): nothing a restore needs is stored by it.
func (s *Store) PutRaw(ctx context.Context, key, path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := s.bucket.NewWriter(wctx, key, nil)
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(w, f)
	if err != nil {
		cancel() // the writer discards what it has: never a partial object under key
		w.Close()
		return n, fmt.Errorf("store %s: %w", key, err)
	}
	return n, w.Close()
}
