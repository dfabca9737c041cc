package uibridge

import (
	"bytes"
	"encoding/json"
	"strconv"
	"sync"
	"time"
)

// The table form of a snapshot (API.md, "Snapshot in table form") names
// the workspace fields once and sends each workspace as an array of
// values in that order: at 10,000 workspaces the key names are about 40%
// of the object form. A null value (or a value missing from the end of a
// row) is a field the object form leaves out; a name "a.b" is field b of
// the nested object a, which is left out when all of its fields are.

// SnapshotTable is the value of the query parameter ?snapshot= that asks
// for the table form.
const SnapshotTable = "table"

// tableColumn is one field of the table form: its wire name and how it
// appends its value, reporting false when the object form leaves the
// field out.
type tableColumn struct {
	name   string
	append func(b []byte, w *Workspace) ([]byte, bool)
}

// tableColumns are in the order rows carry them: fields that are nearly
// always set first, so the trailing nulls of the rarely set ones are cut
// off the row.
var tableColumns = []tableColumn{
	{"id", func(b []byte, w *Workspace) ([]byte, bool) { return appendJSONString(b, w.ID), true }},
	{"name", func(b []byte, w *Workspace) ([]byte, bool) { return appendJSONString(b, w.Name), true }},
	{"provider", func(b []byte, w *Workspace) ([]byte, bool) { return appendJSONString(b, w.Provider), true }},
	{"account_id", func(b []byte, w *Workspace) ([]byte, bool) { return appendJSONString(b, w.AccountID), true }},
	{"state", func(b []byte, w *Workspace) ([]byte, bool) { return appendJSONString(b, w.State), true }},
	{"created_at", func(b []byte, w *Workspace) ([]byte, bool) { return appendJSONTime(b, w.CreatedAt), true }},
	{"updated_at", func(b []byte, w *Workspace) ([]byte, bool) { return appendJSONTime(b, w.UpdatedAt), true }},
	{"rev", func(b []byte, w *Workspace) ([]byte, bool) { return strconv.AppendInt(b, w.Rev, 10), true }},
	{"box_id", func(b []byte, w *Workspace) ([]byte, bool) { return appendOptString(b, w.BoxID) }},
	{"box_url", func(b []byte, w *Workspace) ([]byte, bool) { return appendOptString(b, w.BoxURL) }},
	{"paused_at", func(b []byte, w *Workspace) ([]byte, bool) { return appendOptTime(b, w.PausedAt) }},
	{"last_activity_at", func(b []byte, w *Workspace) ([]byte, bool) { return appendOptTime(b, w.LastActivityAt) }},
	{"size_bytes", func(b []byte, w *Workspace) ([]byte, bool) {
		if w.SizeBytes == nil {
			return b, false
		}
		return strconv.AppendInt(b, *w.SizeBytes, 10), true
	}},
	{"size_source", func(b []byte, w *Workspace) ([]byte, bool) { return appendOptStringPtr(b, w.SizeSource) }},
	{"size_at", func(b []byte, w *Workspace) ([]byte, bool) { return appendOptTime(b, w.SizeAt) }},
	{"lifecycle.idle_pause_after_seconds", func(b []byte, w *Workspace) ([]byte, bool) {
		return appendOptInt(b, w.Lifecycle.IdlePauseAfterSeconds)
	}},
	{"lifecycle.paused_ttl_seconds", func(b []byte, w *Workspace) ([]byte, bool) {
		return appendOptInt(b, w.Lifecycle.PausedTTLSeconds)
	}},
	{"stop_reason", func(b []byte, w *Workspace) ([]byte, bool) { return appendOptStringPtr(b, w.StopReason) }},
	{"delete_after", func(b []byte, w *Workspace) ([]byte, bool) { return appendOptTime(b, w.DeleteAfter) }},
	{"keep", func(b []byte, w *Workspace) ([]byte, bool) { return appendOptBool(b, w.Keep) }},
	{"exit_code", func(b []byte, w *Workspace) ([]byte, bool) {
		if w.ExitCode == nil {
			return b, false
		}
		return strconv.AppendInt(b, int64(*w.ExitCode), 10), true
	}},
	{"adopted", func(b []byte, w *Workspace) ([]byte, bool) { return appendOptBool(b, w.Adopted) }},
	{"last_export_at", func(b []byte, w *Workspace) ([]byte, bool) { return appendOptTime(b, w.LastExportAt) }},
	{"last_export_id", func(b []byte, w *Workspace) ([]byte, bool) { return appendOptString(b, w.LastExportID) }},
	{"deletion.clock", func(b []byte, w *Workspace) ([]byte, bool) { return appendOptString(b, w.Deletion.Clock) }},
	{"deletion.due_at", func(b []byte, w *Workspace) ([]byte, bool) { return appendOptTime(b, w.Deletion.DueAt) }},
	{"deletion.at_risk", func(b []byte, w *Workspace) ([]byte, bool) { return appendOptBool(b, w.Deletion.AtRisk) }},
	{"deletion.export_by", func(b []byte, w *Workspace) ([]byte, bool) { return appendOptTime(b, w.Deletion.ExportBy) }},
	{"progress", func(b []byte, w *Workspace) ([]byte, bool) { return appendOptString(b, w.Progress) }},
	{"error", func(b []byte, w *Workspace) ([]byte, bool) { return appendOptString(b, w.Error) }},
}

// tableFieldsJSON is the "fields" array every table snapshot carries,
// built at the first snapshot rather than at package init.
var tableFieldsJSON = sync.OnceValue(func() []byte {
	names := make([]string, len(tableColumns))
	for i, c := range tableColumns {
		names[i] = c.name
	}
	b, err := json.Marshal(names)
	if err != nil {
		panic(err)
	}
	return b
})

// rowScratch holds the buffers rows are built in: the hub keeps 10,000 of
// them, each copied out at its exact size.
var rowScratch = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// encodeRow is w as one row of the table form. Omitted fields are null;
// trailing nulls are cut off.
func encodeRow(w *Workspace) []byte {
	scratch := rowScratch.Get().(*[]byte)
	defer rowScratch.Put(scratch)
	b := append((*scratch)[:0], '[')
	end := len(b) // the row up to its last value that is set
	for i, c := range tableColumns {
		if i > 0 {
			b = append(b, ',')
		}
		var ok bool
		if b, ok = c.append(b, w); !ok {
			b = append(b, "null"...)
			continue
		}
		end = len(b)
	}
	b = append(b[:end], ']')
	*scratch = b
	return bytes.Clone(b)
}

func appendOptString(b []byte, s string) ([]byte, bool) {
	if s == "" {
		return b, false
	}
	return appendJSONString(b, s), true
}

func appendOptStringPtr(b []byte, s *string) ([]byte, bool) {
	if s == nil {
		return b, false
	}
	return appendJSONString(b, *s), true
}

func appendOptTime(b []byte, t *time.Time) ([]byte, bool) {
	if t == nil {
		return b, false
	}
	return appendJSONTime(b, *t), true
}

func appendOptInt(b []byte, n int64) ([]byte, bool) {
	if n == 0 {
		return b, false
	}
	return strconv.AppendInt(b, n, 10), true
}

func appendOptBool(b []byte, v bool) ([]byte, bool) {
	if !v {
		return b, false
	}
	return append(b, "true"...), true
}

// appendJSONTime encodes t as encoding/json does.
func appendJSONTime(b []byte, t time.Time) []byte {
	b = append(b, '"')
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b, '"')
}

// appendJSONString encodes s as encoding/json does: plain printable ASCII
// is copied, anything else (escapes, non-ASCII, invalid UTF-8) is left to
// encoding/json.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, err := json.Marshal(s)
			if err != nil {
				panic("uibridge: encoding a string: " + err.Error())
			}
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}
