package guard

import (
	"fmt"
	"path/filepath"
	"time"

	"github.com/etcdmedic/etcdmedic/backup"
)

// Unfinished returns the quarantine of dataDir that a run interrupted after writing its
// manifest ("" when there is none): its files may already be moved out of the data dir, which
// then looks empty. Finish completes it.
func Unfinished(dataDir string) (string, error) {
	real, err := filepath.EvalSymlinks(dataDir)
	if err != nil {
		return "", err
	}
	base, err := quarantineBase(real)
	if err != nil {
		return "", err
	}
	partial, err := findPartial(base)
	if err != nil || partial == "" {
		return "", err
	}
	abs, err := filepath.Abs(dataDir)
	if err != nil {
		return "", err
	}
	if _, ok, err := resumedManifest(partial, abs, real); err != nil || !ok {
		return "", err
	}
	return partial, nil
}

// Finish completes an interrupted quarantine of dataDir (see Unfinished), for the reason its
// manifest gives: the entries it lists are moved if they are still in the data dir, verified
// against their checksums, and the folder takes its final name.
func Finish(dataDir string, now time.Time) (*Quarantined, error) {
	partial, err := Unfinished(dataDir)
	if err != nil {
		return nil, err
	}
	if partial == "" {
		return nil, fmt.Errorf("no unfinished quarantine of %s", dataDir)
	}
	var m Manifest
	if err := backup.ReadJSON(filepath.Join(partial, "manifest.json"), &m); err != nil {
		return nil, err
	}
	// The manifest's reason stands: it was checked when the quarantine began.
	return quarantine(dataDir, nil, Reason{Class: m.Class, Why: m.Reason}, now, nil, "")
}
