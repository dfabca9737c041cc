package main

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/canvasapp/companion/core"
)

// crashEnv names the test-only crash point. It is read once at start-up;
// without it no crash hook exists at all.
const crashEnv = "COMPANION_TEST_CRASH_AT"

// crashHook returns the delete pipeline's step hook for
// COMPANION_TEST_CRASH_AT=delete:<step>: the process SIGKILLs itself right
// after that step is journaled, as a power cut would stop it. It exists
// only for the crash tests (e2e); unset, it returns nil. A value that
// names no step stops companion, so a typo cannot make a crash test pass
// by never crashing.
func crashHook(log *slog.Logger) (func(core.OpKind, string), error) {
	v, ok := lookupCrashEnv()
	if !ok {
		return nil, nil
	}
	kind, step, _ := strings.Cut(v, ":")
	if v == exportCrashPoint || v == uploadCrashPoint {
		return nil, nil // the exporter's (exportHook, uploadHook)
	}
	if core.OpKind(kind) != core.OpDelete || !slices.Contains(core.DeleteSteps, step) {
		return nil, fmt.Errorf("%s=%q: want %s, %s or delete:<step>, a step of %s (a test-only setting: unset it)", crashEnv, v, exportCrashPoint, uploadCrashPoint, strings.Join(core.DeleteSteps, ", "))
	}
	log.Warn("test-only crash point armed: companion kills itself when a delete journals this step", "env", crashEnv, "step", step)
	return func(k core.OpKind, s string) {
		if k == core.OpDelete && s == step {
			crashNow(log, "step", s)
		}
	}, nil
}

func lookupCrashEnv() (string, bool) { return os.LookupEnv(crashEnv) }

// crashNow is a crash point reached: SIGKILL, so no deferred clean-up
// runs, and never go on past it.
func crashNow(log *slog.Logger, args ...any) {
	log.Warn("test-only crash point reached; SIGKILL", args...)
	if self, err := os.FindProcess(os.Getpid()); err == nil {
		self.Kill()
	}
	select {}
}

// exportCrashPoint is the crash point inside an export: SIGKILL right after
// the first file is staged, so the export dir holds a staging directory of
// a record left running (the staging-sweep tests).
const exportCrashPoint = "export:staged"

// uploadCrashPoint is SIGKILL right after an export's first file is in
// the export store, so the store holds objects of an export that never
// commits (the replica tests of --export-store).
const uploadCrashPoint = "export:uploaded"

// uploadHook returns the exporter's Uploaded hook for
// COMPANION_TEST_CRASH_AT=export:uploaded; nil otherwise.
func uploadHook(log *slog.Logger) func(core.ExportJob) {
	if v, _ := lookupCrashEnv(); v != uploadCrashPoint {
		return nil
	}
	log.Warn("test-only crash point armed: companion kills itself when an export has uploaded a file", "env", crashEnv)
	return func(job core.ExportJob) {
		crashNow(log, "workspace", job.WorkspaceID, "export", job.ExportID)
	}
}

// holdEnv names the test-only hold point: with COMPANION_TEST_EXPORT_HOLD=DIR,
// an export of workspace W whose file was just staged waits while DIR/W
// exists, so a test can keep an export live (its staging directory in
// place) for as long as it needs.
const holdEnv = "COMPANION_TEST_EXPORT_HOLD"

// exportHook returns the exporter's Staged hook for the test-only crash
// and hold points, or nil when neither is set.
func exportHook(log *slog.Logger) func(core.ExportJob) {
	v, _ := lookupCrashEnv()
	crash := v == exportCrashPoint
	hold, _ := os.LookupEnv(holdEnv)
	if !crash && hold == "" {
		return nil
	}
	if crash {
		log.Warn("test-only crash point armed: companion kills itself when an export has staged a file", "env", crashEnv)
	}
	if hold != "" {
		log.Warn("test-only hold point armed: an export waits after staging a file while its workspace's file exists", "env", holdEnv, "dir", hold)
	}
	return func(job core.ExportJob) {
		if crash {
			crashNow(log, "workspace", job.WorkspaceID, "export", job.ExportID)
		}
		for hold != "" {
			if _, err := os.Stat(filepath.Join(hold, job.WorkspaceID)); err != nil {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}
