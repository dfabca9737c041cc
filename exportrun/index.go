package exportrun

import (
	"encoding/json"
	"io"

	"github.com/canvasapp/companion/core"
)

// The workspace archive's index: one JSON line per directory and file
// (wsarchive.Entry), so a restore checks each file against the SHA-256
// taken when the export was made.
const (
	IndexName = "workspace.files.jsonl"
	KindIndex = core.ExportKindIndex
)

func newIndexEncoder(w io.Writer) *json.Encoder {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc
}
