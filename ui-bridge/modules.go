package uibridge

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"regexp"
)

// ModuleAdmin installs and removes sandboxed provider modules. It is
// optional: without it the module routes answer 404.
type ModuleAdmin interface {
	// Inspect validates a module and returns the summary a person must see
	// before trusting it (hosts it calls, where each credential goes, its
	// SHA-256). Nothing is stored.
	Inspect(ctx context.Context, module []byte) (summary any, err error)
	// Install stores and loads a module whose SHA-256 is sha256, the hash
	// the person confirmed after Inspect. A different hash is a conflict.
	Install(ctx context.Context, module []byte, sha256 string) (summary any, err error)
	// Remove unloads and deletes an installed module.
	Remove(ctx context.Context, name string) error
}

// maxModuleBytes bounds an uploaded module. First-party modules built with
// the Go SDK are about 4 MiB.
const maxModuleBytes = 64 << 20

var sha256Hex = regexp.MustCompile(`^[0-9a-f]{64}$`)

func (s *Server) inspectModule(w http.ResponseWriter, r *http.Request) {
	bin, ok := s.readModule(w, r)
	if !ok {
		return
	}
	sum, err := s.cfg.Modules.Inspect(r.Context(), bin)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"module": sum})
}

func (s *Server) installModule(w http.ResponseWriter, r *http.Request) {
	sha := r.URL.Query().Get("sha256")
	if !sha256Hex.MatchString(sha) {
		writeErrorCode(w, http.StatusBadRequest, "invalid", "pass ?sha256=<the module's SHA-256, lower-case hex> as shown by POST /v1/providers/inspect, to confirm what you install")
		return
	}
	bin, ok := s.readModule(w, r)
	if !ok {
		return
	}
	sum, err := s.cfg.Modules.Install(r.Context(), bin, sha)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.log.Info("provider module installed", "sha256", sha)
	writeJSON(w, http.StatusCreated, map[string]any{"module": sum})
}

func (s *Server) removeModule(w http.ResponseWriter, r *http.Request) {
	if err := s.cfg.Modules.Remove(r.Context(), r.PathValue("name")); err != nil {
		s.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// readModule reads a request body of type application/wasm.
func (s *Server) readModule(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/wasm" {
		writeErrorCode(w, http.StatusUnsupportedMediaType, codeUnsupportedMedia, "send the module as the request body with Content-Type: application/wasm")
		return nil, false
	}
	bin, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxModuleBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeErrorCode(w, http.StatusRequestEntityTooLarge, codeBodyTooLarge, fmt.Sprintf("a module may be at most %d bytes", tooBig.Limit))
			return nil, false
		}
		if isTimeout(err) {
			writeBodyTimeout(w)
			return nil, false
		}
		writeErrorCode(w, http.StatusBadRequest, "invalid", "could not read the module")
		return nil, false
	}
	if len(bin) == 0 {
		writeErrorCode(w, http.StatusBadRequest, "invalid", "the request body is empty; send the .wasm file")
		return nil, false
	}
	return bin, true
}
