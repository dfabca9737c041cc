package uibridge

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"regexp"
	"sync"
	"time"

	"github.com/canvasapp/companion/core"
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

// maxModuleBytes bounds an uploaded module: the host's module size limit
// (ABI.md, Limits). First-party modules built with the Go SDK are about
// 4 MiB.
const maxModuleBytes = 32 << 20

// moduleJobWait is how long an inspection or install waits for a free slot
// (Config.ModuleJobs) before it is answered 503 with Retry-After.
const moduleJobWait = 5 * time.Second

// sha256Hex is compiled on first use, not during start-up.
var sha256Hex = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[0-9a-f]{64}$`) })

func (s *Server) inspectModule(w http.ResponseWriter, r *http.Request) {
	bin, done, ok := s.readModule(w, r)
	if !ok {
		return
	}
	defer done()
	sum, err := s.cfg.Modules.Inspect(r.Context(), bin)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"module": sum})
}

func (s *Server) installModule(w http.ResponseWriter, r *http.Request) {
	sha := r.URL.Query().Get("sha256")
	if !sha256Hex().MatchString(sha) {
		writeErrorCode(w, http.StatusBadRequest, "invalid", "pass ?sha256=<the module's SHA-256, lower-case hex> as shown by POST /v1/providers/inspect, to confirm what you install")
		return
	}
	bin, done, ok := s.readModule(w, r)
	if !ok {
		return
	}
	defer done()
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

// readModule takes one of the module job slots (waiting at most
// moduleJobWait), streams the request body (application/wasm) to a
// temporary file, bounded by maxModuleBytes, and reads it back at its exact
// size. done releases the slot. At most Config.ModuleJobs modules are held
// in memory at once, each at its own size: no upload buffers more.
func (s *Server) readModule(w http.ResponseWriter, r *http.Request) (bin []byte, done func(), ok bool) {
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/wasm" {
		writeErrorCode(w, http.StatusUnsupportedMediaType, codeUnsupportedMedia, "send the module as the request body with Content-Type: application/wasm")
		return nil, nil, false
	}
	if r.ContentLength > maxModuleBytes {
		writeErrorCode(w, http.StatusRequestEntityTooLarge, codeBodyTooLarge, fmt.Sprintf("a module may be at most %d bytes", maxModuleBytes))
		return nil, nil, false
	}
	wait := time.NewTimer(moduleJobWait)
	defer wait.Stop()
	select {
	case s.modJobs <- struct{}{}:
	case <-wait.C:
		w.Header().Set("Retry-After", "5")
		writeErrorCode(w, http.StatusServiceUnavailable, string(core.KindUnavailable), fmt.Sprintf("%d module inspections or installs are already running; retry in a few seconds", cap(s.modJobs)))
		return nil, nil, false
	case <-r.Context().Done():
		return nil, nil, false
	}
	release := func() { <-s.modJobs }
	bin, err := spool(http.MaxBytesReader(w, r.Body, maxModuleBytes))
	if err != nil {
		release()
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeErrorCode(w, http.StatusRequestEntityTooLarge, codeBodyTooLarge, fmt.Sprintf("a module may be at most %d bytes", tooBig.Limit))
			return nil, nil, false
		}
		if isTimeout(err) {
			writeBodyTimeout(w)
			return nil, nil, false
		}
		s.log.Warn("module upload failed", "path", r.URL.Path, "err", err)
		writeErrorCode(w, http.StatusBadRequest, "invalid", "could not read the module")
		return nil, nil, false
	}
	if len(bin) == 0 {
		release()
		writeErrorCode(w, http.StatusBadRequest, "invalid", "the request body is empty; send the .wasm file")
		return nil, nil, false
	}
	return bin, release, true
}

// spool copies body to a temporary file (removed before returning) and
// reads it back in one allocation of its exact size.
func spool(body io.Reader) ([]byte, error) {
	f, err := os.CreateTemp("", "companion-module-*.wasm")
	if err != nil {
		return nil, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	n, err := io.Copy(f, body)
	if err != nil {
		return nil, err
	}
	bin := make([]byte, n)
	if _, err := f.ReadAt(bin, 0); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return bin, nil
}
