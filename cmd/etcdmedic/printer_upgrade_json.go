package main

import (
	"encoding/json"
	"io"
)

// UpgradeApply writes the result on one line: it follows apply's progress events, one JSON
// object a line, so stdout stays JSON lines to its end.
func (jsonPrinter) UpgradeApply(w io.Writer, r upgradeApplyResult) error {
	return json.NewEncoder(w).Encode(r)
}
