package agentclient

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"path"
)

// The agent-server's file routes (docs/agent-server-files.md). Every one
// of them moves the box's idle clock upstream, like Archive: call them
// only for a person's action (an export, a restore).

// DownloadFile streams GET /api/file/download?path=: one regular file
// (the server follows a symlink). 404 is ErrUnconfirmed ("File not
// found"), 400 ErrPermanent ("Path is not a file").
func (c *Client) DownloadFile(ctx context.Context, p string) (Download, error) {
	if !path.IsAbs(p) {
		return Download{}, fmt.Errorf("download file: path must be absolute, got %q", p)
	}
	resp, err := c.do(ctx, "GET /api/file/download", "/api/file/download", url.Values{"path": {p}}, false)
	if err != nil {
		return Download{}, err
	}
	return download("GET /api/file/download", resp), nil
}

// UploadFile streams r to POST /api/file/upload?path= as the multipart
// field "file"; the server makes missing parent directories and replaces
// a file already there. size, when >= 0, is checked against what r gave.
func (c *Client) UploadFile(ctx context.Context, p string, r io.Reader, size int64) error {
	if !path.IsAbs(p) {
		return fmt.Errorf("upload file: path must be absolute, got %q", p)
	}
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() {
		part, err := mw.CreateFormFile("file", path.Base(p))
		var n int64
		if err == nil {
			n, err = io.Copy(part, r)
		}
		if err == nil && size >= 0 && n != size {
			err = fmt.Errorf("upload %s: read %d bytes, want %d", p, n, size)
		}
		if err == nil {
			err = mw.Close()
		}
		pw.CloseWithError(err)
	}()
	resp, err := c.send(ctx, "POST /api/file/upload", http.MethodPost, "/api/file/upload", url.Values{"path": {p}}, pr,
		mw.FormDataContentType(), false)
	pr.CloseWithError(io.ErrClosedPipe) // ends the writer if the request stopped reading
	if err != nil {
		return err
	}
	return drainSuccess(resp, "POST /api/file/upload")
}

// CreateDirectory calls POST /api/file/create_directory?path=: it makes
// the directory and its parents, and succeeds when it exists already.
func (c *Client) CreateDirectory(ctx context.Context, p string) error {
	if !path.IsAbs(p) {
		return fmt.Errorf("create directory: path must be absolute, got %q", p)
	}
	resp, err := c.send(ctx, "POST /api/file/create_directory", http.MethodPost, "/api/file/create_directory",
		url.Values{"path": {p}}, nil, "", false)
	if err != nil {
		return err
	}
	return drainSuccess(resp, "POST /api/file/create_directory")
}

// drainSuccess reads a {"success": true} answer.
func drainSuccess(resp *http.Response, op string) error {
	defer resp.Body.Close()
	var ok struct {
		Success *bool `json:"success"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 4096)).Decode(&ok); err != nil || ok.Success == nil || !*ok.Success {
		return &Error{Op: op, Status: resp.StatusCode, Class: ClassRetryable,
			Err: fmt.Errorf("the answer is not {\"success\": true}")}
	}
	return nil
}

// Subdir is one entry of GET /api/file/search_subdirs.
type Subdir struct {
	Name string `json:"name"`
	Path string `json:"path"`
}

// Subdirs lists every subdirectory of dir (hidden ones too, symlinks
// never), following the route's paging. Upstream lists directories only:
// no route lists the files of a directory.
func (c *Client) Subdirs(ctx context.Context, dir string) ([]Subdir, error) {
	if !path.IsAbs(dir) {
		return nil, fmt.Errorf("search subdirs: path must be absolute, got %q", dir)
	}
	var out []Subdir
	seen := map[string]bool{}
	q := url.Values{"path": {dir}, "limit": {"100"}, "include_hidden": {"true"}}
	for range maxPages {
		var page struct {
			Items      []Subdir `json:"items"`
			NextPageID *string  `json:"next_page_id"`
		}
		if err := c.getJSON(ctx, "GET /api/file/search_subdirs", "/api/file/search_subdirs", q, &page); err != nil {
			return nil, err
		}
		out = append(out, page.Items...)
		if page.NextPageID == nil || *page.NextPageID == "" {
			return out, nil
		}
		if seen[*page.NextPageID] {
			return nil, &Error{Op: "GET /api/file/search_subdirs", Status: http.StatusOK, Class: ClassRetryable,
				Err: fmt.Errorf("next_page_id %q repeats: paging does not advance", *page.NextPageID)}
		}
		seen[*page.NextPageID] = true
		q.Set("page_id", *page.NextPageID)
	}
	return nil, fmt.Errorf("search subdirs of %s: more than %d pages", dir, maxPages)
}

// Ready calls GET /ready (no auth, not activity): true once the server
// finished starting (200), false while it answers 503 "initializing".
func (c *Client) Ready(ctx context.Context) (bool, error) {
	resp, err := c.do(ctx, "GET /ready", "/ready", nil, false)
	if err != nil {
		if e, ok := err.(*Error); ok && e.Status == http.StatusServiceUnavailable {
			return false, nil
		}
		return false, err
	}
	resp.Body.Close()
	return true, nil
}

// Size is the download's Content-Length; an answer without one is an
// error (upstream's file responses always carry it).
func (d Download) Size() (int64, error) {
	if d.Length < 0 {
		return 0, &Error{Op: d.op, Status: http.StatusOK, Class: ClassRetryable, Err: fmt.Errorf("the answer has no Content-Length")}
	}
	return d.Length, nil
}
