package plan

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/etcdmedic/etcdmedic/backup"
)

// File is the name of a plan in its folder; the journal sits beside it.
const File = "plan.json"

// ErrEdited means a plan file was changed after it was made.
var ErrEdited = errors.New("the plan was changed since it was made (its checksum does not match): make a new plan instead of editing one")

// envelope holds a plan with the checksum of its exact bytes.
type envelope struct {
	Checksum string          `json:"checksum"`
	Plan     json.RawMessage `json:"plan"`
}

// Save writes v as the plan in dir (created if needed), with a checksum; it never replaces a
// plan that is there already.
func Save(dir string, v any) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(dir, File)); err == nil {
		return fmt.Errorf("%s already holds a plan: apply it, or choose another folder", dir)
	}
	body, err := json.MarshalIndent(v, "  ", "  ")
	if err != nil {
		return err
	}
	sum := sha256.Sum256(body)
	return backup.WriteJSONAtomic(filepath.Join(dir, File), envelope{Checksum: hex.EncodeToString(sum[:]), Plan: body})
}

// Load reads the plan in dir into v; a missing plan is fs.ErrNotExist, an edited one ErrEdited.
func Load(dir string, v any) error {
	path := filepath.Join(dir, File)
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var env envelope
	if err := json.Unmarshal(b, &env); err != nil || len(env.Plan) == 0 {
		return fmt.Errorf("%s is not a plan etcdmedic wrote", path)
	}
	sum := sha256.Sum256(env.Plan)
	if hex.EncodeToString(sum[:]) != env.Checksum {
		return fmt.Errorf("%s: %w", path, ErrEdited)
	}
	if err := json.Unmarshal(env.Plan, v); err != nil {
		return fmt.Errorf("%s is not a plan etcdmedic wrote: %v", path, err)
	}
	return nil
}

// IsMissing reports whether Load found no plan.
func IsMissing(err error) bool { return errors.Is(err, fs.ErrNotExist) }
