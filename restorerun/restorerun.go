// Package restorerun is core's FileRestorer: it puts an export's
// workspace archive back into a box, of any provider, through the box's
// agent-server (docs/agent-server-files.md): every file is uploaded with
// POST /api/file/upload while it is hashed and checked against the
// export's index, then read back with GET /api/file/download and hashed
// again; empty directories are made with POST /api/file/create_directory;
// executable files get their bit back with one chmod through the bash
// route when the box has one.
//
// It holds nothing whole in memory: the archive streams from the export,
// small files are buffered one by one for the upload workers, large ones
// stream through. Running it twice for one box is the same as once: an
// upload replaces the file.
package restorerun

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/canvasapp/companion/agentclient"
	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/internal/agenterr"
	"github.com/canvasapp/companion/internal/units"
	"github.com/canvasapp/companion/wsarchive"
)

// Restorer implements core.FileRestorer. The zero value works.
type Restorer struct {
	// HTTP is the client for the box; nil means one with no overall
	// timeout (the context bounds each restore).
	HTTP *http.Client
	// Workers is how many files are uploaded at once; 0 means 4.
	Workers int
	// ReadyWait bounds the wait for a new box's agent-server to be ready;
	// 0 means 2 minutes.
	ReadyWait time.Duration
}

var _ core.FileRestorer = (*Restorer)(nil)

// smallFile is the size up to which a file is buffered and handed to a
// worker; a larger one is uploaded by the reader itself, streaming.
const smallFile = 1 << 20

// RestoreFiles puts job's archive into the box (core.FileRestorer).
func (r *Restorer) RestoreFiles(ctx context.Context, job core.FileRestoreJob, progress func(string)) (core.FileRestoreResult, error) {
	if progress == nil {
		progress = func(string) {}
	}
	cl, err := agentclient.New(agentclient.Endpoint{URL: job.Endpoint.URL, Headers: http.Header(job.Endpoint.Headers),
		SessionKey: job.Endpoint.SessionKey}, r.HTTP)
	if err != nil {
		return core.FileRestoreResult{}, fmt.Errorf("restore: %w", err)
	}
	if err := r.waitReady(ctx, cl, progress); err != nil {
		return core.FileRestoreResult{}, err
	}
	var index *indexReader
	if job.Index != nil {
		rc, err := job.Open(job.Index.Name)
		if err != nil {
			return core.FileRestoreResult{}, err
		}
		defer rc.Close()
		index = &indexReader{sc: bufio.NewScanner(rc), name: job.Index.Name}
		index.sc.Buffer(make([]byte, 64<<10), 16<<20)
	}
	archive, err := job.Open(job.Archive.Name)
	if err != nil {
		return core.FileRestoreResult{}, err
	}
	defer archive.Close()
	u := &uploader{cl: cl, job: job, progress: progress, index: index, dirs: map[string]bool{}, full: map[string]bool{},
		work: make(chan upload), workers: max(r.Workers, 1)}
	if r.Workers == 0 {
		u.workers = 4
	}
	res, err := u.run(ctx, archive)
	return res, agenterr.Classify(err)
}

// waitReady polls the agent-server's /ready (not activity) until it
// answers 200.
func (r *Restorer) waitReady(ctx context.Context, cl *agentclient.Client, progress func(string)) error {
	wait := r.ReadyWait
	if wait == 0 {
		wait = 2 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	progress("restore: waiting for the new box's agent-server")
	var last error
	for {
		ok, err := cl.Ready(ctx)
		if ok {
			return nil
		}
		if err != nil {
			last = err
		}
		select {
		case <-ctx.Done():
			if last == nil {
				last = errors.New("it kept answering that it is initializing")
			}
			return &core.Error{Kind: core.KindUnavailable, Message: fmt.Sprintf("the new box's agent-server was not ready within %s: %v", wait, last), Err: last}
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// upload is one file for a worker.
type upload struct {
	rel  string
	size int64
	sum  string // its SHA-256, as the export recorded it or as read
	data []byte
}

// uploader runs one restore.
type uploader struct {
	cl       *agentclient.Client
	job      core.FileRestoreJob
	progress func(string)
	index    *indexReader
	root     string
	workers  int
	work     chan upload

	mu    sync.Mutex
	err   error
	res   core.FileRestoreResult
	dirs  map[string]bool // every directory of the archive
	full  map[string]bool // directories a file went into (made by the upload)
	execs []string        // files whose executable bit is to be set
	last  time.Time
}

func (u *uploader) run(ctx context.Context, archive io.Reader) (core.FileRestoreResult, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for range u.workers {
		wg.Go(func() {
			for up := range u.work {
				if err := u.put(ctx, up.rel, up.size, up.sum, bytes.NewReader(up.data)); err != nil {
					u.fail(err)
					cancel()
				}
			}
		})
	}
	_, rerr := wsarchive.Read(archive, func(m wsarchive.Member) error { return u.member(ctx, m) })
	if rerr == nil {
		// To its end: the export's reader checks the file's SHA-256 there.
		_, rerr = io.Copy(io.Discard, archive)
	}
	close(u.work)
	wg.Wait()
	if err := u.failed(); err != nil {
		return u.res, err
	}
	if rerr != nil {
		return u.res, fmt.Errorf("restore: %s: %w", u.job.Archive.Name, rerr)
	}
	if u.index != nil {
		if err := u.index.end(); err != nil {
			return u.res, err
		}
	}
	if err := u.emptyDirs(ctx); err != nil {
		return u.res, err
	}
	u.setExecutable(ctx)
	u.progress(fmt.Sprintf("restore: %d files, %s, and %d directories put back", u.res.Files, units.Bytes(u.res.Bytes), u.res.Dirs))
	return u.res, nil
}

// member handles one archive member, in the archive's order.
func (u *uploader) member(ctx context.Context, m wsarchive.Member) error {
	if err := u.failed(); err != nil {
		return err
	}
	if u.root == "" {
		u.root = u.job.Root
		top, _, _ := strings.Cut(m.Header.Name, "/")
		if u.job.Archive.Root == "" && top != path.Base(u.root) {
			// An export from before archives recorded their root: a top
			// directory not named like the root was a repository right
			// below it.
			u.root = path.Join(u.root, top)
		}
	}
	if m.Rel == "" {
		return nil
	}
	isDir := m.Header.Typeflag == tar.TypeDir
	want, err := u.index.next(m, isDir)
	if err != nil {
		return err
	}
	if isDir {
		u.mu.Lock()
		u.dirs[m.Rel] = true
		u.mu.Unlock()
		return nil
	}
	if m.Header.Mode&0o111 != 0 {
		u.execs = append(u.execs, m.Rel)
	}
	if m.Header.Size > smallFile {
		return u.put(ctx, m.Rel, m.Header.Size, want, m.Body)
	}
	data, err := io.ReadAll(m.Body)
	if err != nil {
		return err
	}
	sum := want
	if sum == "" {
		h := sha256.Sum256(data)
		sum = hex.EncodeToString(h[:])
	}
	select {
	case u.work <- upload{rel: m.Rel, size: m.Header.Size, sum: sum, data: data}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// put uploads one file while hashing it, compares the hash with want
// ("" when the export has no index: then with what was read), and reads
// the file back from the box.
func (u *uploader) put(ctx context.Context, rel string, size int64, want string, r io.Reader) error {
	target := path.Join(u.root, rel)
	h := sha256.New()
	if err := u.cl.UploadFile(ctx, target, io.TeeReader(r, h), size); err != nil {
		return fmt.Errorf("restore: upload %s: %w", target, err)
	}
	sent := hex.EncodeToString(h.Sum(nil))
	if want != "" && sent != want {
		return &core.Error{Kind: core.KindConflict, Message: fmt.Sprintf(
			"restore: %s in the export no longer matches the SHA-256 its index recorded: the export is damaged", rel)}
	}
	if err := u.readBack(ctx, target, size, sent); err != nil {
		return err
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	u.res.Files++
	u.res.Bytes += size
	for d := path.Dir(rel); d != "."; d = path.Dir(d) {
		u.full[d] = true
	}
	if time.Since(u.last) > time.Second {
		u.last = time.Now()
		u.progress(fmt.Sprintf("restore: %d files, %s put back", u.res.Files, units.Bytes(u.res.Bytes)))
	}
	return nil
}

// readBack downloads target and checks it holds what was sent.
func (u *uploader) readBack(ctx context.Context, target string, size int64, sum string) error {
	d, err := u.cl.DownloadFile(ctx, target)
	if err != nil {
		return fmt.Errorf("restore: read back %s: %w", target, err)
	}
	defer d.Body.Close()
	h := sha256.New()
	n, err := io.Copy(h, d.Body)
	if err != nil {
		return fmt.Errorf("restore: read back %s: %w", target, err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); n != size || got != sum {
		return &core.Error{Kind: core.KindUnavailable, Message: fmt.Sprintf(
			"restore: %s reads back from the box as %d bytes with another SHA-256 than the %d bytes uploaded", target, n, size)}
	}
	return nil
}

// emptyDirs makes the directories no file went into (an upload makes
// the others).
func (u *uploader) emptyDirs(ctx context.Context) error {
	for d := range u.dirs {
		if u.full[d] {
			continue
		}
		if err := u.cl.CreateDirectory(ctx, path.Join(u.root, d)); err != nil {
			return fmt.Errorf("restore: make directory %s: %w", path.Join(u.root, d), err)
		}
	}
	u.res.Dirs = len(u.dirs)
	return nil
}

// setExecutable gives executable files their bit back with chmod through
// the bash route; a box without a shell or chmod keeps them as uploaded
// (0644), and the result says so.
func (u *uploader) setExecutable(ctx context.Context) {
	const batch = 200
	for len(u.execs) > 0 {
		n := min(batch, len(u.execs))
		args := make([]string, n)
		for i, rel := range u.execs[:n] {
			args[i] = shellQuote(rel)
		}
		res, err := u.cl.ExecuteBash(ctx, "chmod +x -- "+strings.Join(args, " "), u.root, 60)
		if err == nil && *res.ExitCode != 0 {
			msg := ""
			if res.Stderr != nil {
				msg = strings.TrimSpace(*res.Stderr)
			}
			err = fmt.Errorf("chmod exited %d: %s", *res.ExitCode, msg)
		}
		if err != nil {
			u.res.Notes = append(u.res.Notes, fmt.Sprintf("%d executable files were put back without their executable bit (%v)", len(u.execs), err))
			return
		}
		u.execs = u.execs[n:]
	}
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func (u *uploader) fail(err error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.err == nil {
		u.err = err
	}
}

func (u *uploader) failed() error {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.err
}

// indexReader reads the export's index in step with the archive: each
// member must be the index's next entry.
type indexReader struct {
	sc   *bufio.Scanner
	name string
}

// next checks m against the next entry and returns the SHA-256 the
// index recorded for a file ("" without an index).
func (ix *indexReader) next(m wsarchive.Member, isDir bool) (string, error) {
	if ix == nil {
		return "", nil
	}
	if !ix.sc.Scan() {
		return "", ix.damaged(fmt.Sprintf("it ends before %s", m.Rel))
	}
	var e wsarchive.Entry
	if err := json.Unmarshal(ix.sc.Bytes(), &e); err != nil {
		return "", ix.damaged(fmt.Sprintf("a line does not read: %v", err))
	}
	typ := wsarchive.TypeFile
	if isDir {
		typ = wsarchive.TypeDir
	}
	if e.Path != m.Rel || e.Type != typ || (!isDir && e.Size != m.Header.Size) {
		return "", ix.damaged(fmt.Sprintf("it lists %s %s (%d bytes) where the archive holds %s %s (%d bytes)",
			e.Type, e.Path, e.Size, typ, m.Rel, m.Header.Size))
	}
	return e.SHA256, nil
}

// end checks the index has no entry left.
func (ix *indexReader) end() error {
	if ix.sc.Scan() {
		return ix.damaged("it lists more than the archive holds")
	}
	if err := ix.sc.Err(); err != nil {
		return ix.damaged(err.Error())
	}
	return nil
}

func (ix *indexReader) damaged(why string) error {
	return &core.Error{Kind: core.KindConflict, Message: fmt.Sprintf("restore: the export's index %s does not match its archive (%s): the export is damaged", ix.name, why)}
}
