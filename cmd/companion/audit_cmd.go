package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/db"
)

const auditUsage = `Usage:
  companion audit verify [--data-dir DIR | --database-file FILE | --database URL]
      recompute the hash chain of the audit trail, in the data dir's SQLite
      database or in PostgreSQL (serve replicas' store; it may run while
      they do). Exit code 0: every entry verifies; 1: the chain is broken
      (the first bad entry is named); 2: the trail could not be read.
`

func runAudit(args []string, stdout, stderr io.Writer) int {
	sub, rest, fs, code, ok := subcommand("audit", auditUsage, args, stdout, stderr)
	if !ok {
		return code
	}
	dataDir := fs.String("data-dir", defaultDataDir(), "companion's data `directory`")
	dbf := addStoreFlags(fs)
	if err := fs.Parse(rest); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if sub != "verify" || fs.NArg() != 0 {
		fmt.Fprintf(stderr, "companion audit: unknown command or extra arguments %q\n\n%s", args, auditUsage)
		return 2
	}
	dbURL, err := dbf.resolve()
	if err != nil {
		fmt.Fprintf(stderr, "companion audit verify: %v\n", err)
		return 2
	}
	return auditVerify(context.Background(), storeAt{dataDir: *dataDir, url: dbURL}, stdout, stderr)
}

// auditVerifier is what audit verify needs of a store (both engines).
type auditVerifier interface {
	VerifyAudit(ctx context.Context) (int, error)
}

func auditVerify(ctx context.Context, where storeAt, stdout, stderr io.Writer) int {
	store, err := where.open(ctx, true)
	if err != nil {
		fmt.Fprintf(stderr, "companion audit verify: %v\n", err)
		return 2
	}
	defer store.Close()
	v, ok := store.(auditVerifier)
	if !ok {
		fmt.Fprintf(stderr, "companion audit verify: this store cannot verify its trail\n")
		return 2
	}
	n, err := v.VerifyAudit(ctx)
	var brk *db.AuditBreak
	switch {
	case errors.As(err, &brk):
		fmt.Fprintf(stderr, "audit trail BROKEN at entry %d: %s (%d entries before it verified)\n", brk.ID, brk.Reason, n)
		return 1
	case err != nil:
		fmt.Fprintf(stderr, "companion audit verify: %v\n", err)
		return 2
	}
	fmt.Fprintf(stdout, "audit trail OK: %d entries verified\n", n)
	return 0
}

// tokenActor names the launch token's holder in the audit trail.
func tokenActor(m mode) string {
	if m == modeServe {
		return core.ActorServeLocal
	}
	return core.ActorDesktopToken
}
