package exportrun

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/exports"
	"github.com/canvasapp/companion/exportstore"
)

// An export into object storage (Exporter.Store) is written as every
// export is, into a spool directory on local disk (Writer: hashed, read
// back), then each file is uploaded, read back from the store and checked
// against the same SHA-256, manifest.json last; the spool copy is removed
// once the store holds it. Its record's Dir is storeDirPrefix + the
// export's directory in the store, so any replica finds it.

// storeDirPrefix marks a record's Dir as a directory in the export store.
const storeDirPrefix = "store:"

var (
	_ core.ExportOpener  = (*Exporter)(nil)
	_ core.ExportRemover = (*Exporter)(nil)
)

// upload copies the committed spool export at dir into the store and
// removes the spool copy. It returns the record's Dir.
func (x *Exporter) upload(ctx context.Context, job core.ExportJob, dir string, files []core.ExportFile, c *counter) (string, error) {
	u, err := x.Store.Begin(job.Owner, job.WorkspaceID, job.ExportID)
	if err != nil {
		return "", fmt.Errorf("export: %w", err)
	}
	done := false
	defer func() {
		if !done {
			u.Abort(context.WithoutCancel(ctx))
		}
	}()
	c.total, c.last = 0, 0 // the upload's own bytes, after the spool's
	for i, f := range files {
		if f.Name == exports.ManifestName {
			continue
		}
		c.step = fmt.Sprintf("upload %d of %d", i+1, len(files))
		if err := x.uploadFile(ctx, u, dir, f, c); err != nil {
			return "", err
		}
		if x.Uploaded != nil {
			x.Uploaded(job)
		}
	}
	manifest, err := os.ReadFile(filepath.Join(dir, exports.ManifestName))
	if err != nil {
		return "", fmt.Errorf("export: read the spooled manifest: %w", err)
	}
	ref, err := u.Commit(ctx, manifest)
	if err != nil {
		return "", fmt.Errorf("export: commit to %s: %w", x.Store, err)
	}
	done = true
	if err := os.RemoveAll(dir); err != nil {
		return "", fmt.Errorf("export: remove the spool copy %s (the store holds the export): %w", dir, err)
	}
	return storeDirPrefix + ref.Dir(), nil
}

func (x *Exporter) uploadFile(ctx context.Context, u *exportstore.Upload, dir string, f core.ExportFile, c *counter) error {
	fh, err := os.Open(filepath.Join(dir, f.Name))
	if err != nil {
		return fmt.Errorf("export: open the spooled %s: %w", f.Name, err)
	}
	defer fh.Close()
	obj, err := u.Add(ctx, f.Name, statReader{c.wrap(fh), fh})
	if err != nil {
		return fmt.Errorf("export: upload %s to %s: %w", f.Name, x.Store, err)
	}
	if obj.SHA256 != f.SHA256 || obj.Bytes != f.Bytes {
		return fmt.Errorf("export: %s in %s is %d bytes with SHA-256 %s, not the %d bytes %s spooled: %w",
			f.Name, x.Store, obj.Bytes, obj.SHA256, f.Bytes, f.SHA256, exportstore.ErrMismatch)
	}
	return nil
}

// statReader reads through a wrapper and answers Stat from the file, so
// the store can size the parts of a large file.
type statReader struct {
	io.Reader
	f *os.File
}

func (r statReader) Stat() (os.FileInfo, error) { return r.f.Stat() }

// storeRef is the store export a record's Dir names, if it names one.
func storeRef(dir string) (exportstore.Ref, bool, error) {
	rel, ok := strings.CutPrefix(dir, storeDirPrefix)
	if !ok {
		return exportstore.Ref{}, false, nil
	}
	ref, err := exportstore.ParseRef(rel)
	return ref, true, err
}

// OpenExportFile opens a file of a committed export, in the store or the
// export dir (core.ExportOpener).
func (x *Exporter) OpenExportFile(ctx context.Context, rec core.ExportRecord, name string) (io.ReadSeekCloser, error) {
	ref, inStore, err := storeRef(rec.Dir)
	switch {
	case err != nil:
		return nil, err
	case !inStore:
		return os.Open(filepath.Join(rec.Dir, name))
	case x.Store == nil && x.StoreErr != nil:
		return nil, x.StoreErr
	case x.Store == nil:
		return nil, fmt.Errorf("export %s is in an export store, and this companion has none (--export-store)", rec.ID)
	}
	return x.Store.Open(ctx, ref, name)
}

// verifyStored streams every file of a store export back and checks it
// against its manifest.
func (x *Exporter) verifyStored(ctx context.Context, ref exportstore.Ref) error {
	if x.Store == nil {
		return fmt.Errorf("export %s is in an export store, and this companion has none (--export-store)", ref.ID)
	}
	raw, err := x.Store.Manifest(ctx, ref)
	if err != nil {
		return err
	}
	var m exports.Manifest
	if err := json.Unmarshal(raw, &m); err != nil {
		return fmt.Errorf("export %s: manifest in %s: %w", ref.ID, x.Store, err)
	}
	if !m.Verified {
		return fmt.Errorf("export %s: its manifest in %s does not say verified", ref.ID, x.Store)
	}
	for _, f := range m.Files {
		if err := x.Store.Verify(ctx, ref, f.Name, f.Bytes, f.SHA256); err != nil {
			return err
		}
	}
	return nil
}

// RemoveExport removes a verified export's files, in the store or under
// the export dir (core.ExportRemover, for export retention).
func (x *Exporter) RemoveExport(ctx context.Context, rec core.ExportRecord) (int64, error) {
	ref, inStore, err := storeRef(rec.Dir)
	switch {
	case err != nil:
		return 0, err
	case !inStore:
		return x.Writer.Remove(rec.Dir)
	case x.Store == nil:
		return 0, fmt.Errorf("export %s is in an export store, and none is configured (--export-store); nothing removed", rec.ID)
	}
	return x.Store.Remove(ctx, ref)
}
