package uibridge

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
)

// DefaultMaxBodyBytes is the default limit on a request body.
const DefaultMaxBodyBytes = 1 << 20

// decodeBody reads r's body as one JSON object into v. It requires the
// Content-Type application/json, which an HTML form cannot send, so a
// cross-site form post fails here even before the token check would. On
// failure it answers the request and returns false.
//
// When optional is true an empty body is accepted and leaves v alone.
func (s *Server) decodeBody(w http.ResponseWriter, r *http.Request, v any, optional bool) bool {
	if optional && r.ContentLength == 0 {
		return true
	}
	if !optional && !isJSON(r.Header.Get("Content-Type")) {
		writeErrorCode(w, http.StatusUnsupportedMediaType, codeUnsupportedMedia, "the request body must be sent with Content-Type: application/json")
		return false
	}
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.maxBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeErrorCode(w, http.StatusRequestEntityTooLarge, codeBodyTooLarge, fmt.Sprintf("the request body is larger than %d bytes", tooBig.Limit))
			return false
		}
		if isTimeout(err) {
			writeBodyTimeout(w)
			return false
		}
		writeErrorCode(w, http.StatusBadRequest, codeInvalidJSON, "could not read the request body")
		return false
	}
	if len(bytes.TrimSpace(data)) == 0 {
		if optional {
			return true
		}
		writeErrorCode(w, http.StatusBadRequest, codeInvalidJSON, "the request body is empty; send a JSON object")
		return false
	}
	if optional && !isJSON(r.Header.Get("Content-Type")) {
		writeErrorCode(w, http.StatusUnsupportedMediaType, codeUnsupportedMedia, "the request body must be sent with Content-Type: application/json")
		return false
	}
	if msg := decodeStrict(data, v); msg != "" {
		writeErrorCode(w, http.StatusBadRequest, codeInvalidJSON, msg)
		return false
	}
	return true
}

// writeBodyTimeout answers a request whose body did not arrive in time;
// the connection is closed after it.
func writeBodyTimeout(w http.ResponseWriter) {
	w.Header().Set("Connection", "close")
	writeErrorCode(w, http.StatusRequestTimeout, codeBodyTimeout, "the request body did not arrive in time; send it at once")
}

func isJSON(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && mt == "application/json"
}

// decodeStrict decodes data, which must hold exactly one JSON object with
// only known fields, into v. It returns "" on success, else a message
// that says what is wrong and where.
func decodeStrict(data []byte, v any) string {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return describeJSONError(data, err)
	}
	if rest := bytes.TrimSpace(data[dec.InputOffset():]); len(rest) > 0 {
		return fmt.Sprintf("unexpected data after the JSON object at %s", position(data, int64(len(data)-len(rest))))
	}
	return ""
}

func describeJSONError(data []byte, err error) string {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		// Offset counts the offending byte; point at it.
		return fmt.Sprintf("malformed JSON at %s: %s", position(data, syn.Offset-1), syn.Error())
	case errors.As(err, &typ):
		if typ.Field == "" {
			return fmt.Sprintf("the body must be a JSON object, not a JSON %s", typ.Value)
		}
		return fmt.Sprintf("field %q at %s: expected %s, got a JSON %s", typ.Field, position(data, typ.Offset), jsonTypeName(typ.Type.Kind().String()), typ.Value)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Sprintf("malformed JSON: it ends unexpectedly at %s", position(data, int64(len(data))))
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return "unknown field " + strings.TrimPrefix(err.Error(), "json: unknown field ")
	}
	return "malformed JSON: " + err.Error()
}

// jsonTypeName names a Go kind the way a JSON author would.
func jsonTypeName(kind string) string {
	switch kind {
	case "string":
		return "a string"
	case "bool":
		return "true or false"
	case "map", "struct":
		return "an object"
	case "slice", "array":
		return "an array"
	case "int", "int64", "int32", "uint", "uint64", "uint32", "float64":
		return "a number"
	}
	return kind
}

// position describes a byte offset as line, column and byte.
func position(data []byte, off int64) string {
	off = min(max(off, 0), int64(len(data)))
	before := data[:off]
	line := bytes.Count(before, []byte{'\n'}) + 1
	col := off - int64(bytes.LastIndexByte(before, '\n'))
	return fmt.Sprintf("line %d, column %d (byte %d)", line, col, off)
}
