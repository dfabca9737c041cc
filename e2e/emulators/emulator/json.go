package emulator

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
)

// maxBody bounds request bodies; no real create body comes near it.
const maxBody = 1 << 20

// WriteJSON writes v as JSON with status.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, "emulator: encoding response: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

// ErrEmptyBody is returned by DecodeJSON for a request without a body.
var ErrEmptyBody = errors.New("empty request body")

// DecodeJSON reads r's body as one JSON value into v. Unknown fields are
// ignored, as the real APIs' clients expect; malformed JSON, trailing data
// and oversized bodies are errors.
func DecodeJSON(r *http.Request, v any) error {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil {
		return fmt.Errorf("reading body: %w", err)
	}
	if len(body) > maxBody {
		return fmt.Errorf("body larger than %d bytes", maxBody)
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return ErrEmptyBody
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("unexpected data after the JSON value")
	}
	return nil
}
