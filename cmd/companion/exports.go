package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/exportrun"
	"github.com/canvasapp/companion/exports"
	"github.com/canvasapp/companion/exportstore"
	"github.com/canvasapp/companion/providers/wasm"
)

// checkExportStore checks --export-store's form before the ready line;
// an object store is reached (its bucket checked) when companion starts
// exporting. file:///dir is --export-dir by another name.
func (f *serverFlags) checkExportStore() error {
	if f.exportStore == "" {
		return nil
	}
	u, err := url.Parse(f.exportStore)
	if err != nil {
		return fmt.Errorf("--export-store %q: %v (want file:///dir, s3://bucket/prefix or gs://bucket/prefix)", f.exportStore, err)
	}
	switch u.Scheme {
	case "file":
		if u.Host != "" || !filepath.IsAbs(u.Path) {
			return fmt.Errorf("--export-store %q: a file URL names an absolute directory with three slashes, e.g. file:///srv/exports", f.exportStore)
		}
		if f.exportDir != "" && filepath.Clean(f.exportDir) != filepath.Clean(u.Path) {
			return fmt.Errorf("--export-dir %s and --export-store %s name two places for exports: give one", f.exportDir, f.exportStore)
		}
		f.exportDir, f.exportStore = u.Path, ""
	case "s3", "gs":
		if f.exportDir != "" {
			return fmt.Errorf("--export-dir %s and --export-store %s name two places for exports: give one", f.exportDir, u.Redacted())
		}
	default:
		return fmt.Errorf("--export-store %q: want file:///dir, s3://bucket/prefix?region=R&endpoint=URL or gs://bucket/prefix", u.Redacted())
	}
	return nil
}

// exportRoot is where exports are written: --export-dir, else
// <data-dir>/exports; with an object store, a spool dir in the data dir
// from which each export is uploaded.
func exportRoot(f *serverFlags) (string, error) {
	switch {
	case f.exportStore != "":
		return filepath.Join(f.dataDir, "export-spool"), nil
	case f.exportDir != "":
		return filepath.Abs(f.exportDir)
	}
	return filepath.Join(f.dataDir, "exports"), nil
}

// createExportRoot creates the default export dir (or the spool). Only
// those are created: a location someone chose that is missing (an
// unmounted disk) must make exports fail, not fill the disk below it.
// companion calls it after the ready line (a directory made on a first
// start costs about half a millisecond on ext4) and before it serves
// anything that exports.
func createExportRoot(f *serverFlags, root string) error {
	if f.exportDir != "" {
		return nil
	}
	if err := os.MkdirAll(root, 0o700); err != nil {
		return fmt.Errorf("create export dir: %w", err)
	}
	return nil
}

// newExporter builds the exporter. Boxes are reached at the endpoint their
// adapter reports, through the same guarded client as every other
// agent-server request. An object store is opened (its bucket checked)
// here: a store that cannot be reached stops companion with the reason.
func newExporter(ctx context.Context, m mode, f *serverFlags, keys core.Secrets, log *slog.Logger) (*exportrun.Exporter, error) {
	root, err := exportRoot(f)
	if err != nil {
		return nil, err
	}
	// The data dir remembers the marker written in the export root, so a
	// root on a disk that is not mounted is refused (exports/marker.go).
	w := &exports.Writer{Root: root, MarkerRecord: filepath.Join(f.dataDir, "export-root.json")}
	x := &exportrun.Exporter{Writer: w, HTTP: wasm.EndpointClient()}
	if f.exportStore != "" {
		opts, err := storeOptions(ctx, keys, f.exportStore, log)
		if err == nil {
			x.Store, err = exportstore.Open(ctx, f.exportStore, opts)
		}
		if err != nil {
			if m != modeDesktop {
				return nil, fmt.Errorf("--export-store: %w", err)
			}
			// A laptop may be offline: the desktop starts, and its
			// exports (and so its deletes) fail with the reason.
			x.StoreErr = fmt.Errorf("the export store could not be reached when companion started (%w); restart companion once it can be", err)
			log.Warn("the export store cannot be reached: exports fail until companion restarts", "err", err)
		}
	}
	return x, nil
}

// recoverExports sweeps the staging directories a crash left and fails the
// records of exports that never finished. Neither stops companion: a
// missing export location is reported when an export is asked for.
func recoverExports(ctx context.Context, x *exportrun.Exporter, svc *core.Service, log *slog.Logger) error {
	if x.Store != nil {
		return recoverStoreExports(ctx, x, svc, log)
	}
	if svc.SharedStore() {
		// The export dir is shared too: what looks unfinished may be
		// another replica's export in progress. Recover sweeps only the
		// staging files whose export record is not running
		// (core.SweepStaging).
		return svc.RecoverExports(ctx)
	}
	n, bytes, err := x.Writer.RemovePartial()
	if err != nil {
		log.Warn("could not sweep unfinished exports", "export_dir", x.Writer.Root, "removed", n, "err", err)
	} else if n > 0 {
		log.Info("removed unfinished exports", "count", n, "bytes", bytes, "export_dir", x.Writer.Root)
	}
	return svc.RecoverExports(ctx)
}

// recoverStoreExports empties the spool (only this process, which holds
// the data dir, writes there, so nothing in it is still being written),
// fails the records of exports that never finished, and then, in the
// background (listing a large bucket takes a while, and nothing waits for
// it) and again every hour, sweeps the store's objects of exports whose
// record is not running: a replica uploading now keeps its own.
func recoverStoreExports(ctx context.Context, x *exportrun.Exporter, svc *core.Service, log *slog.Logger) error {
	if ents, err := os.ReadDir(x.Writer.Root); err == nil {
		for _, e := range ents {
			if err := os.RemoveAll(filepath.Join(x.Writer.Root, e.Name())); err != nil {
				log.Warn("could not empty the export spool", "dir", x.Writer.Root, "err", err)
			}
		}
	}
	if err := svc.RecoverExports(ctx); err != nil {
		return err
	}
	go func() {
		// At start, then every storeSweepInterval: a replica that died
		// mid-upload leaves objects that its own restart may never sweep.
		for {
			sweepStore(ctx, x.Store, svc, log)
			select {
			case <-ctx.Done():
				return
			case <-time.After(storeSweepInterval):
			}
		}
	}()
	return nil
}

// storeSweepInterval is how often the store is swept after the start.
const storeSweepInterval = time.Hour

// sweepStore removes the store's objects of exports that will never
// commit, logging each.
func sweepStore(ctx context.Context, store *exportstore.Store, svc *core.Service, log *slog.Logger) {
	swept, err := store.Sweep(ctx, func(ref exportstore.Ref) bool {
		rec, err := svc.Export(ctx, ref.Owner, ref.ID)
		return err == nil && rec.State == core.ExportRunning || err != nil && !core.IsKind(err, core.KindNotFound)
	})
	for _, sw := range swept {
		log.Info("removed an unfinished export from the export store", "export", sw.Ref.ID, "workspace", sw.Ref.Workspace,
			"objects", sw.Objects, "bytes", sw.Bytes, "uploads", sw.Uploads, "store", store.String())
	}
	if err != nil && ctx.Err() == nil {
		log.Warn("could not sweep unfinished exports from the export store", "store", store.String(), "err", err)
	}
}

// redactedURL is raw without a password, for people to read.
func redactedURL(raw string) string {
	if u, err := url.Parse(raw); err == nil {
		return u.Redacted()
	}
	return raw
}
