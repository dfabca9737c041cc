package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/db"
)

// seedDataDir creates a desktop data dir whose store holds n live
// workspaces, written through the db package as companion itself writes
// them. The workspaces belong to an account that does not exist, so the
// running binary never reconciles (or rewrites) them.
func seedDataDir(dir string, n int) error {
	ctx := context.Background()
	s, err := db.Open(ctx, filepath.Join(dir, "companion.db"))
	if err != nil {
		return fmt.Errorf("seed %d workspaces: %w", n, err)
	}
	for i := range n {
		if _, err := s.SaveWorkspace(ctx, benchWorkspace(i)); err != nil {
			s.Close()
			return fmt.Errorf("seed workspace %d of %d: %w", i, n, err)
		}
	}
	return s.Close()
}

// benchWorkspace is a paused, sized workspace with every field set, so
// each one encodes to a realistic size.
func benchWorkspace(i int) core.Workspace {
	at := time.Date(2026, 3, 4, 5, 6, 7, 123_000_000, time.UTC).Add(time.Duration(i) * time.Second)
	return core.Workspace{
		ID:             fmt.Sprintf("ws_bench%07d", i),
		Name:           fmt.Sprintf("feature branch %d", i),
		AccountID:      "acc_bench_absent",
		Provider:       "docker",
		State:          core.StatePaused,
		BoxID:          fmt.Sprintf("c0ffee%010d", i),
		BoxURL:         fmt.Sprintf("http://127.0.0.1:%d", 20000+i%40000),
		Lifecycle:      core.Lifecycle{IdlePauseAfter: 30 * time.Minute, PausedTTL: 7 * 24 * time.Hour},
		Options:        map[string]string{"image": "ghcr.io/canvasapp/agent-server:latest"},
		PausedAt:       at.Add(time.Hour),
		LastActivityAt: at.Add(30 * time.Minute),
		Size:           &core.Size{Bytes: 1<<30 + int64(i), Source: core.SizeDockerEngineUsed, At: at.Add(2 * time.Hour)},
		CreatedAt:      at,
	}
}

// dataFile reports whether dir already holds a seeded store (reused
// between groups of one run).
func dataFile(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, "companion.db"))
	return err == nil
}

var (
	dataRoot string
	seeded   = map[int]string{}
)

// seededDir returns a data dir holding n workspaces, seeding it on first
// use; groups of one run share them (none of them adds workspaces).
func seededDir(n int) (string, error) {
	if d, ok := seeded[n]; ok {
		return d, nil
	}
	if dataRoot == "" {
		d, err := os.MkdirTemp("", "companion-bench-data-")
		if err != nil {
			return "", err
		}
		dataRoot = d
	}
	d := filepath.Join(dataRoot, fmt.Sprintf("ws%d", n))
	if !dataFile(d) {
		began := time.Now()
		if err := seedDataDir(d, n); err != nil {
			return "", err
		}
		fmt.Fprintf(os.Stderr, "benchrun: seeded %d workspaces in %s\n", n, time.Since(began).Round(time.Millisecond))
	}
	seeded[n] = d
	return d, nil
}
