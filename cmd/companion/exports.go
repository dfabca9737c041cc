package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/exportrun"
	"github.com/canvasapp/companion/exports"
	"github.com/canvasapp/companion/providers/wasm"
)

// exportRoot is where exports go: --export-dir, else <data-dir>/exports.
func exportRoot(f *serverFlags) (string, error) {
	if f.exportDir != "" {
		return filepath.Abs(f.exportDir)
	}
	return filepath.Join(f.dataDir, "exports"), nil
}

// createExportRoot creates the default export dir. Only the default is
// created: a location someone chose that is missing (an unmounted disk)
// must make exports fail, not fill the disk below it. companion calls it
// after the ready line (a directory made on a first start costs about half
// a millisecond on ext4) and before it serves anything that exports.
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
// agent-server request.
func newExporter(f *serverFlags) (*exportrun.Exporter, error) {
	root, err := exportRoot(f)
	if err != nil {
		return nil, err
	}
	// The data dir remembers the marker written in the export root, so a
	// root on a disk that is not mounted is refused (exports/marker.go).
	w := &exports.Writer{Root: root, MarkerRecord: filepath.Join(f.dataDir, "export-root.json")}
	return &exportrun.Exporter{Writer: w, HTTP: wasm.EndpointClient()}, nil
}

// recoverExports sweeps the staging directories a crash left and fails the
// records of exports that never finished. Neither stops companion: a
// missing export location is reported when an export is asked for.
func recoverExports(ctx context.Context, x *exportrun.Exporter, svc *core.Service, log *slog.Logger) error {
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
