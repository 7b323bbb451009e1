package store

import (
	"path/filepath"
	"strings"

	"github.com/etcdmedic/etcdmedic/backup"
)

// A file:// store writes each object to a temporary file beside it and renames it into place
// (gocloud's fileblob), which alone survives a power cut only by luck: the renamed file can
// come back empty (ext4's delayed allocation) and the rename or a new folder can be lost, so a
// backup, a manifest or a segment reported stored would vanish or read as 0 bytes. Put syncs
// the temporary file before the rename, and the object's folder after it, and each folder it
// created in its parent, as far up as the store's folder. Object stores (S3, GCS, Azure)
// commit an upload durably themselves.

// syncFoldersOf makes key's name durable in a file:// store (nothing for the others): its
// folder synced, and every folder above it up to the store's, the first time each is met.
func (s *Store) syncFoldersOf(key string) error {
	if s.folder == "" {
		return nil
	}
	dir := filepath.Dir(filepath.Join(s.folder, filepath.FromSlash(key)))
	if err := backup.SyncDir(dir); err != nil {
		return err
	}
	for dir != s.folder && strings.HasPrefix(dir, s.folder+string(filepath.Separator)) {
		if _, ok := s.durableFolders.Load(dir); ok {
			return nil
		}
		parent := filepath.Dir(dir)
		if err := backup.SyncDir(parent); err != nil {
			return err
		}
		s.durableFolders.Store(dir, true)
		dir = parent
	}
	return nil
}
