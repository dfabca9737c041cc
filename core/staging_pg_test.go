package core_test

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/exportrun"
	"github.com/canvasapp/companion/exports"
	"github.com/canvasapp/companion/internal/testsupport"
	"github.com/canvasapp/companion/internal/testsupport/pgtest"
)

// TestSweepStagingByRecord: on a shared store, SweepStaging removes the
// staging directories whose export record is failed, verified or missing,
// logs each with its size, and leaves alone a running export's staging,
// a directory whose name carries no record, and every verified export's
// final directory.
func TestSweepStagingByRecord(t *testing.T) {
	ctx := context.Background()
	st := openPG(t, pgtest.NewDatabase(t))
	root := t.TempDir()
	w := &exports.Writer{Root: root}
	var logs testsupport.SyncBuffer
	svc := newTestService(t, ctx, core.Config{Store: st, Providers: &core.Registry{},
		Exporter: &exportrun.Exporter{Writer: w}, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	now := time.Now().UTC().Truncate(time.Second)
	put := func(id, state string) {
		t.Helper()
		if err := st.PutExport(ctx, core.ExportRecord{ID: id, WorkspaceID: "ws_s", Owner: "alice", CreatedAt: now, UpdatedAt: now, State: state,
			Verified: state == core.ExportVerified, Dir: filepath.Join(root, "ws_s", "done"),
			Files: []core.ExportFile{{Name: "a.tar.gz", Kind: "archive", Bytes: 5, SHA256: strings.Repeat("0", 64)}}}); err != nil {
			t.Fatal(err)
		}
	}
	stage := func(record string, size int) string {
		t.Helper()
		e, err := w.BeginRecord("ws_s", "box", record)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.Add(exports.File{Name: "a.tar.gz", Kind: exports.KindArchive}, bytes.NewReader(make([]byte, size))); err != nil {
			t.Fatal(err)
		}
		ps, err := w.Partials("ws_s")
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range ps {
			if p.Record == record && strings.Contains(p.Dir, e.ID()) {
				return p.Dir
			}
		}
		t.Fatalf("staging of %q not listed: %+v", record, ps)
		return ""
	}
	put("exp_running", core.ExportRunning)
	put("exp_failed", core.ExportFailed)
	put("exp_verified", core.ExportVerified)
	running := stage("exp_running", 100)
	failed := stage("exp_failed", 1000)
	verifiedStaging := stage("exp_verified", 10) // a zombie writer's, say
	missing := stage("exp_missing", 7)
	unmarked := stage("", 5)
	// A committed export of the verified record: its final directory.
	e, err := w.BeginRecord("ws_s", "box", "exp_verified")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Add(exports.File{Name: "a.tar.gz", Kind: exports.KindArchive}, strings.NewReader("final")); err != nil {
		t.Fatal(err)
	}
	_, final, err := e.Commit()
	if err != nil {
		t.Fatal(err)
	}

	res, err := svc.SweepStaging(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if res.Removed != 3 || res.Bytes != 1000+10+7 || res.Unmarked != 1 {
		t.Fatalf("swept %+v, want 3 removed, 1017 bytes, 1 unmarked", res)
	}
	for _, gone := range []string{failed, verifiedStaging, missing} {
		if _, err := os.Stat(gone); !os.IsNotExist(err) {
			t.Errorf("%s is still there (%v)", gone, err)
		}
	}
	for _, kept := range []string{running, unmarked, final} {
		if _, err := os.Stat(kept); err != nil {
			t.Errorf("%s was removed: %v", kept, err)
		}
	}
	if _, err := exports.VerifyDir(final); err != nil {
		t.Errorf("the verified export no longer verifies: %v", err)
	}
	out := logs.String()
	for _, want := range []string{"export=exp_failed record=failed bytes=1000", "export=exp_verified record=verified bytes=10", "export=exp_missing record=missing bytes=7"} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}

	// Once the running record fails, the next sweep (of that workspace)
	// takes its staging too.
	put("exp_running", core.ExportFailed)
	if res, err := svc.SweepStaging(ctx, "ws_s"); err != nil || res.Removed != 1 || res.Bytes != 100 {
		t.Fatalf("second sweep %+v, %v; want the failed record's 100 bytes", res, err)
	}
	if _, err := os.Stat(running); !os.IsNotExist(err) {
		t.Errorf("%s is still there (%v)", running, err)
	}
}
