package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/canvasapp/companion/db"
)

// The offline subcommands (accounts, providers, secrets, users, tokens)
// share these steps: parse flags around the arguments, open the data dir's
// store, and report the subcommand's error in one form.

// parseFlags parses flags that may come before or after the positional
// arguments (the flag package stops at the first argument). When ok is
// false the caller returns code: 0 after --help, 2 for a bad flag (the
// flag package has already said what was wrong).
func parseFlags(fs *flag.FlagSet, rest []string) (args []string, code int, ok bool) {
	args, err := parseWithArgs(fs, rest)
	if errors.Is(err, flag.ErrHelp) {
		return nil, 0, false
	} else if err != nil {
		return nil, 2, false
	}
	return args, 0, true
}

// parseWithArgs parses flags that may come before or after the positional
// arguments, returning the arguments in order.
func parseWithArgs(fs *flag.FlagSet, rest []string) ([]string, error) {
	var args []string
	for {
		if err := fs.Parse(rest); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return args, nil
		}
		args = append(args, fs.Arg(0))
		rest = fs.Args()[1:]
	}
}

// subcommandResult prints a subcommand's error as "companion CMD SUB: ERR"
// and gives the exit code: 1 for an error, 0 for none.
func subcommandResult(cmd, sub string, err error, stderr io.Writer) int {
	if err != nil {
		fmt.Fprintf(stderr, "companion %s %s: %v\n", cmd, sub, err)
		return 1
	}
	return 0
}

// openDataDirStore creates the data dir when it is missing and opens its
// database.
func openDataDirStore(ctx context.Context, dataDir string) (*db.Store, error) {
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, fmt.Errorf("create data dir: %w", err)
	}
	return db.Open(ctx, sqlitePath(dataDir))
}
