package agentclient

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"path"
	"strings"
)

// Archive formats of GET /api/file/archive.
const (
	// FormatTarGz is the full, self-contained capture.
	FormatTarGz = "tar.gz"
	// FormatGitDelta is the compact capture: a binary git diff against a
	// base commit; it needs that base to be rebuilt.
	FormatGitDelta = "git-delta"
)

// ArchiveRequest are the archive route's parameters.
type ArchiveRequest struct {
	Path   string // absolute directory in the box
	Format string // FormatTarGz or FormatGitDelta; required here, since upstream's default (git-delta) is the lossy one
	// BaseRef is git-delta only; "" lets the server pick (auto).
	BaseRef string
	// DefaultExcludes keeps the server's default excludes (node_modules,
	// .git, dist, ...). A full capture wants them off, so the tar.gz keeps
	// build output and history; git-delta normally keeps them on.
	DefaultExcludes bool
	Exclude         []string
}

// ArchiveMeta is what the X-Archive-* headers said, percent-decoded where
// upstream encodes them. Empty fields were not sent.
type ArchiveMeta struct {
	RepoRemote string
	Branch     string
	HeadCommit string
	RepoRoot   string
	// BaseCommit and BaseRef come with a git-delta against a resolved base;
	// both are absent when the patch is against the empty tree.
	BaseCommit string
	BaseRef    string
}

// ArchiveDownload is a streamed archive; the caller must close Body.
type ArchiveDownload struct {
	Download
	Format string
	Meta   ArchiveMeta
}

// Archive streams GET /api/file/archive. This route moves the box's idle
// clock upstream: call it only for a person's action (a delete's export).
// A 400 is ErrNothingToArchive, 401/404 ErrUnconfirmed, 422/429/5xx and
// network failures ErrRetryable.
func (c *Client) Archive(ctx context.Context, r ArchiveRequest) (ArchiveDownload, error) {
	if r.Format != FormatTarGz && r.Format != FormatGitDelta {
		return ArchiveDownload{}, fmt.Errorf("archive: format must be %q or %q, got %q", FormatTarGz, FormatGitDelta, r.Format)
	}
	if !path.IsAbs(r.Path) {
		return ArchiveDownload{}, fmt.Errorf("archive: path must be absolute, got %q", r.Path)
	}
	if r.BaseRef != "" && (r.Format != FormatGitDelta || strings.HasPrefix(r.BaseRef, "-")) {
		return ArchiveDownload{}, fmt.Errorf("archive: base_ref %q is only for git-delta and must not start with '-'", r.BaseRef)
	}
	q := url.Values{"path": {r.Path}, "format": {r.Format}}
	if r.BaseRef != "" {
		q.Set("base_ref", r.BaseRef)
	}
	q.Set("use_default_excludes", fmt.Sprint(r.DefaultExcludes))
	for _, e := range r.Exclude {
		q.Add("exclude", e)
	}
	resp, err := c.do(ctx, "GET /api/file/archive", "/api/file/archive", q, true)
	if err != nil {
		return ArchiveDownload{}, err
	}
	return ArchiveDownload{Download: download("GET /api/file/archive", resp), Format: r.Format, Meta: archiveMeta(resp.Header)}, nil
}

func archiveMeta(h http.Header) ArchiveMeta {
	return ArchiveMeta{
		RepoRemote: unquote(h.Get("X-Archive-Repo-Remote")),
		Branch:     unquote(h.Get("X-Archive-Branch")),
		HeadCommit: unquote(h.Get("X-Archive-Head-Commit")),
		RepoRoot:   unquote(h.Get("X-Archive-Repo-Root")),
		// Sent raw upstream; decoding too accepts a server that encodes
		// them like the others (a SHA is the same either way).
		BaseCommit: unquote(h.Get("X-Archive-Base-Commit")),
		BaseRef:    unquote(h.Get("X-Archive-Base-Ref")),
	}
}

// unquote undoes Python's quote(v, safe=""). A value that is not valid
// percent-encoding (an older or other server sending it raw) is kept as
// sent. PathUnescape, not QueryUnescape: quote() never turns a space
// into '+', so a '+' is literal.
func unquote(v string) string {
	if !strings.Contains(v, "%") {
		return v
	}
	d, err := url.PathUnescape(v)
	if err != nil {
		return v
	}
	return d
}
