package cloudflare

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/canvasapp/companion/e2e/emulators/emulator"
)

// workspacePath maps a /workspace path of the request onto container c's
// directory; ok is false when it leaves /workspace.
func (s *Server) workspacePath(c *Container, p string) (string, bool) {
	clean := path.Clean("/" + p)
	if !strings.HasPrefix(clean, "/workspace/") && clean != "/workspace" {
		// The bridge takes paths relative to /workspace too.
		clean = path.Clean("/workspace/" + p)
	}
	if clean != "/workspace" && !strings.HasPrefix(clean, "/workspace/") {
		return "", false
	}
	return filepath.Join(s.dir(c.ID), filepath.FromSlash(clean)), true
}

// readFile is GET /v1/sandbox/:id/file/<path>: raw bytes.
func (s *Server) readFile(w http.ResponseWriter, r *http.Request, c *Container) {
	p, ok := s.workspacePath(c, r.PathValue("path"))
	if !ok {
		fail(w, http.StatusForbidden, "path must resolve inside /workspace", "invalid_request")
		return
	}
	b, err := os.ReadFile(p)
	if err != nil {
		fail(w, http.StatusNotFound, "File not found: "+r.PathValue("path"), "workspace_read_not_found")
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Write(b)
}

// writeFile is PUT /v1/sandbox/:id/file/<path>: raw body, ≤ 32 MiB.
func (s *Server) writeFile(w http.ResponseWriter, r *http.Request, c *Container) {
	p, ok := s.workspacePath(c, r.PathValue("path"))
	if !ok {
		fail(w, http.StatusForbidden, "path must resolve inside /workspace", "invalid_request")
		return
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, MaxTarBytes+1))
	if err != nil {
		fail(w, http.StatusBadRequest, "reading body: "+err.Error(), "invalid_request")
		return
	}
	if len(b) > MaxTarBytes {
		fail(w, http.StatusRequestEntityTooLarge, "Body exceeds 32 MiB", "payload_too_large")
		return
	}
	os.MkdirAll(filepath.Dir(p), 0o755)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		fail(w, http.StatusInternalServerError, err.Error(), "workspace_write_error")
		return
	}
	emulator.WriteJSON(w, http.StatusOK, map[string]bool{"ok": true})
}

// persist is POST /v1/sandbox/:id/persist?excludes=a,b: a raw tar of
// /workspace (paths relative to it).
func (s *Server) persist(w http.ResponseWriter, r *http.Request, c *Container) {
	root := filepath.Join(s.dir(c.ID), "workspace")
	var excludes []string
	if v := r.URL.Query().Get("excludes"); v != "" {
		excludes = strings.Split(v, ",")
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if rel == "." {
			return nil
		}
		rel = filepath.ToSlash(rel)
		for _, x := range excludes {
			if x != "" && (rel == x || strings.HasPrefix(rel, x+"/")) {
				if d.IsDir() {
					return filepath.SkipDir
				}
				return nil
			}
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if !info.Mode().IsRegular() && !info.IsDir() {
			return nil
		}
		h, _ := tar.FileInfoHeader(info, "")
		h.Name = rel
		if info.IsDir() {
			h.Name += "/"
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if info.Mode().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			tw.Write(b)
		}
		return nil
	})
	if err == nil {
		err = tw.Close()
	}
	if err != nil {
		fail(w, http.StatusInternalServerError, "tar failed: "+err.Error(), "exec_transport_error")
		return
	}
	w.Header().Set("Content-Type", "application/x-tar")
	w.Write(buf.Bytes())
}

// hydrate is POST /v1/sandbox/:id/hydrate: a raw tar (non-empty, ≤ 32
// MiB) extracted into /workspace.
func (s *Server) hydrate(w http.ResponseWriter, r *http.Request, c *Container) {
	b, err := io.ReadAll(io.LimitReader(r.Body, MaxTarBytes+1))
	switch {
	case err != nil:
		fail(w, http.StatusBadRequest, "reading body: "+err.Error(), "invalid_request")
		return
	case len(b) == 0:
		fail(w, http.StatusBadRequest, "Request body must be a non-empty tar archive", "invalid_request")
		return
	case len(b) > MaxTarBytes:
		fail(w, http.StatusRequestEntityTooLarge, "Tar archive exceeds 32 MiB", "payload_too_large")
		return
	}
	root := filepath.Join(s.dir(c.ID), "workspace")
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			fail(w, http.StatusBadRequest, "not a tar archive: "+err.Error(), "invalid_request")
			return
		}
		name := path.Clean("/" + h.Name)
		dst := filepath.Join(root, filepath.FromSlash(name))
		switch h.Typeflag {
		case tar.TypeDir:
			os.MkdirAll(dst, 0o755)
		case tar.TypeReg:
			os.MkdirAll(filepath.Dir(dst), 0o755)
			data, err := io.ReadAll(tr)
			if err != nil {
				fail(w, http.StatusBadRequest, "not a tar archive: "+err.Error(), "invalid_request")
				return
			}
			os.WriteFile(dst, data, 0o644)
		}
	}
	emulator.WriteJSON(w, http.StatusOK, map[string]bool{"ok": true})
}
