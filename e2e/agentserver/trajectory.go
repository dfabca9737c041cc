package main

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// downloadTrajectory is GET /api/file/download-trajectory/{id}: the
// conversation's directory as a zip rooted at <hex>/, with secrets redacted
// from JSON files. As upstream, the zip is built as a file beside the
// conversation directories and deleted once sent, so a large trajectory is
// never held in memory. It is not activity.
func (s *Server) downloadTrajectory(w http.ResponseWriter, r *http.Request) {
	id, ok := pathID(w, r, "conversation_id")
	if !ok {
		return
	}
	dir := s.store.convDir(id)
	var tmp *os.File
	s.store.mu.Lock()
	fi, err := os.Stat(dir)
	if err == nil && fi.IsDir() {
		tmp, err = os.CreateTemp(s.store.dir, id.hex()+"-*.zip")
		if err == nil {
			defer os.Remove(tmp.Name())
			defer tmp.Close()
			err = zipTrajectory(tmp, dir, id.hex())
		}
	} else if err == nil || errors.Is(err, fs.ErrNotExist) {
		err = fs.ErrNotExist
	}
	s.store.mu.Unlock()
	switch {
	case errors.Is(err, fs.ErrNotExist):
		writeJSON(w, http.StatusNotFound, detail("Conversation not found"))
		return
	case err != nil:
		internalError(w, err)
		return
	}
	fileResponse(w, r, tmp, "application/octet-stream", id.hex()+".zip", nil)
}

// zipTrajectory writes dir into zw under root/, redacting *.json and
// *.jsonl files and copying every other file byte for byte.
func zipTrajectory(w io.Writer, dir, root string) error {
	zw := zip.NewWriter(w)
	if _, err := zw.Create(root + "/"); err != nil {
		return err
	}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil || rel == "." {
			return err
		}
		name := root + "/" + filepath.ToSlash(rel)
		if d.IsDir() {
			_, err := zw.Create(name + "/")
			return err
		}
		if !d.Type().IsRegular() || strings.HasSuffix(path, ".tmp") {
			return nil // symlinks, and a write the emulator had not finished
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		switch {
		case strings.HasSuffix(path, ".json"):
			if out, changed, err := redactJSON(data); err == nil && changed {
				data = out
			}
		case strings.HasSuffix(path, ".jsonl"):
			data = redactJSONL(data)
		}
		f, err := zw.Create(name)
		if err != nil {
			return err
		}
		_, err = f.Write(data)
		return err
	})
	if err != nil {
		return err
	}
	return zw.Close()
}

// redacted replaces every secret value.
const redacted = "**********"

// secretKeys are the keys whose values are always redacted.
var secretKeys = map[string]bool{
	"api_key": true, "aws_access_key_id": true, "aws_secret_access_key": true,
	"aws_session_token": true, "llm_api_key": true,
}

// fernetPrefix starts every Fernet token (encrypted secrets).
const fernetPrefix = "gAAAAA"

// redactJSON redacts one JSON document. Upstream re-serializes a changed
// file with Python's json.dumps, so the output uses its separators (", "
// and ": ") and ASCII escapes, and keeps key order and number text. changed
// is false when nothing was redacted; the caller then keeps the original
// bytes.
func redactJSON(data []byte) (out []byte, changed bool, err error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	rw := &rewriter{dec: dec}
	tok, err := dec.Token()
	if err != nil {
		return nil, false, err
	}
	if err := rw.value(tok); err != nil {
		return nil, false, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, false, errors.New("trailing data after JSON value")
	}
	return rw.buf.Bytes(), rw.changed, nil
}

// redactJSONL redacts each line of a JSON-lines file; a line that is not
// JSON is kept as it is.
func redactJSONL(data []byte) []byte {
	lines := bytes.Split(data, []byte("\n"))
	for i, line := range lines {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		if out, changed, err := redactJSON(line); err == nil && changed {
			lines[i] = out
		}
	}
	return bytes.Join(lines, []byte("\n"))
}

type rewriter struct {
	dec     *json.Decoder
	buf     bytes.Buffer
	changed bool
}

func (rw *rewriter) value(tok json.Token) error {
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			return rw.object()
		case '[':
			return rw.array()
		}
		return fmt.Errorf("unexpected %v", t)
	case string:
		if strings.HasPrefix(t, fernetPrefix) {
			rw.changed = true
			t = redacted
		}
		writePyString(&rw.buf, t)
	case json.Number:
		rw.buf.WriteString(t.String())
	case bool:
		rw.buf.WriteString(strconv.FormatBool(t))
	case nil:
		rw.buf.WriteString("null")
	default:
		return fmt.Errorf("unexpected token %T", tok)
	}
	return nil
}

func (rw *rewriter) object() error {
	rw.buf.WriteByte('{')
	for first := true; rw.dec.More(); first = false {
		kt, err := rw.dec.Token()
		if err != nil {
			return err
		}
		key, _ := kt.(string)
		if !first {
			rw.buf.WriteString(", ")
		}
		writePyString(&rw.buf, key)
		rw.buf.WriteString(": ")
		vt, err := rw.dec.Token()
		if err != nil {
			return err
		}
		if secretKeys[key] && vt != nil {
			if s, ok := vt.(string); !ok || s != redacted {
				rw.changed = true
			}
			if err := rw.skip(vt); err != nil {
				return err
			}
			writePyString(&rw.buf, redacted)
			continue
		}
		if err := rw.value(vt); err != nil {
			return err
		}
	}
	if _, err := rw.dec.Token(); err != nil { // '}'
		return err
	}
	rw.buf.WriteByte('}')
	return nil
}

func (rw *rewriter) array() error {
	rw.buf.WriteByte('[')
	for first := true; rw.dec.More(); first = false {
		if !first {
			rw.buf.WriteString(", ")
		}
		vt, err := rw.dec.Token()
		if err != nil {
			return err
		}
		if err := rw.value(vt); err != nil {
			return err
		}
	}
	if _, err := rw.dec.Token(); err != nil { // ']'
		return err
	}
	rw.buf.WriteByte(']')
	return nil
}

// skip consumes the rest of a value whose first token is tok.
func (rw *rewriter) skip(tok json.Token) error {
	d, ok := tok.(json.Delim)
	if !ok || (d != '{' && d != '[') {
		return nil
	}
	for depth := 1; depth > 0; {
		t, err := rw.dec.Token()
		if err != nil {
			return err
		}
		if d, ok := t.(json.Delim); ok {
			if d == '{' || d == '[' {
				depth++
			} else {
				depth--
			}
		}
	}
	return nil
}

// writePyString writes s as Python's json.dumps does (ensure_ascii): every
// character outside printable ASCII as \uXXXX, astral ones as a surrogate
// pair.
func writePyString(b *bytes.Buffer, s string) {
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\b':
			b.WriteString(`\b`)
		case r == '\f':
			b.WriteString(`\f`)
		case r < 0x20 || (r >= 0x7f && r < 0x10000):
			fmt.Fprintf(b, `\u%04x`, r)
		case r >= 0x10000:
			r -= 0x10000
			fmt.Fprintf(b, `\u%04x\u%04x`, 0xd800+(r>>10), 0xdc00+(r&0x3ff))
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
}
