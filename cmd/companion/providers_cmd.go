package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/canvasapp/companion/db"
	"github.com/canvasapp/companion/providers/wasm"
)

const providersUsage = `Usage:
  companion providers install [--yes] [--data-dir DIR | --database-file FILE] FILE.wasm
        show what the module will call and which credential goes where, ask,
        then store it under the data dir and pin its SHA-256
  companion providers inspect FILE.wasm
        show the same summary without installing
  companion providers list [--data-dir DIR | --database-file FILE] [--json]
        list first-party and installed provider modules
  companion providers remove [--data-dir DIR | --database-file FILE] NAME
        forget an installed module
  companion providers pack --manifest MANIFEST.json -o OUT.wasm IN.wasm
        embed a manifest into a module (for provider authors)

A running companion loads modules installed this way at its next start; to
install into a running one, use POST /v1/providers (see ui-bridge/API.md).

With --database URL or --database-file FILE (an installation whose serve
replicas keep their state in PostgreSQL) install, list and remove work on
that database instead, while the replicas run: the module's bytes are kept
in the database with its pin, and every replica loads an installed module
(or unloads a removed one) within its --reconcile-interval.
`

func runProviders(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	sub, rest, fs, code, ok := subcommand("providers", providersUsage, args, stdout, stderr)
	if !ok {
		return code
	}
	dataDir := fs.String("data-dir", defaultDataDir(), "companion's data `directory`")
	dbf := addStoreFlags(fs)
	yes := fs.Bool("yes", false, "install without asking")
	asJSON := fs.Bool("json", false, "print JSON")
	manifestPath := fs.String("manifest", "", "manifest JSON `file` (pack)")
	out := fs.String("o", "", "output `file` (pack)")
	// Flags may come after the file too ("pack in.wasm --manifest m.json
	// -o out.wasm"): the flag package stops at the first argument.
	files, code, ok := parseFlags(fs, rest)
	if !ok {
		return code
	}
	dbURL, err := dbf.resolve()
	if err != nil {
		fmt.Fprintf(stderr, "companion providers %s: %v\n", sub, err)
		return 2
	}
	ctx := context.Background()
	where := storeAt{dataDir: *dataDir, url: dbURL}
	switch sub {
	case "inspect":
		err = providersInspect(ctx, files, stdout)
	case "install":
		err = providersInstall(ctx, where, files, *yes, stdin, stdout, stderr)
	case "list":
		err = providersList(ctx, where, *asJSON, stdout, stderr)
	case "remove":
		err = providersRemove(ctx, where, files, stdout, stderr)
	case "pack":
		err = providersPack(*manifestPath, *out, files, stdout)
	default:
		fmt.Fprintf(stderr, "companion providers: unknown subcommand %q\n\n%s", sub, providersUsage)
		return 2
	}
	return subcommandResult("providers", sub, err, stderr)
}

func oneArg(args []string, what string) (string, error) {
	if len(args) != 1 {
		return "", fmt.Errorf("want exactly one %s (see --help)", what)
	}
	return args[0], nil
}

// openHost opens the store (the data dir's, or PostgreSQL's when
// where.url is set) and a Wasm host on it, for the offline commands.
func openHost(ctx context.Context, where storeAt, progressOut io.Writer) (*wasm.Host, serverStore, func(), error) {
	dataDir := where.dataDir
	var store serverStore
	var err error
	if where.url == "" {
		store, err = openDataDirStore(ctx, dataDir)
	} else {
		store, err = db.OpenPostgres(ctx, where.url)
	}
	if err != nil {
		return nil, nil, nil, err
	}
	host, err := wasm.New(wasm.Config{
		CacheDir:      filepath.Join(dataDir, "wasm-cache"),
		ModulesDir:    filepath.Join(dataDir, "modules"),
		Pins:          store,
		Logger:        slog.New(slog.DiscardHandler),
		ReservedNames: builtinNames,
		Progress:      func(line string) { fmt.Fprintln(progressOut, "companion: "+line) },
		// list reads manifests only; install compiles what it admits.
		CompileOnUse: true,
	})
	if err != nil {
		store.Close()
		return nil, nil, nil, err
	}
	loadFirstParty(host, nil, slog.New(slog.DiscardHandler)) // so first-party names are reserved and listed
	return host, store, func() { host.Close(ctx); store.Close() }, nil
}

func providersInspect(ctx context.Context, args []string, stdout io.Writer) error {
	path, err := oneArg(args, "module file")
	if err != nil {
		return err
	}
	bin, err := readModuleFile(path)
	if err != nil {
		return err
	}
	host, err := wasm.New(wasm.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return err
	}
	defer host.Close(ctx)
	s, err := host.Inspect(ctx, bin)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, s.String())
	return nil
}

func providersInstall(ctx context.Context, where storeAt, args []string, yes bool, stdin io.Reader, stdout, stderr io.Writer) error {
	path, err := oneArg(args, "module file")
	if err != nil {
		return err
	}
	// Read once: what is shown is exactly what gets installed.
	bin, err := readModuleFile(path)
	if err != nil {
		return err
	}
	host, _, closeAll, err := openHost(ctx, where, stderr)
	if err != nil {
		return err
	}
	defer closeAll()
	s, err := host.Inspect(ctx, bin)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, s.String())
	if !yes {
		fmt.Fprint(stdout, "\nInstall this module? [y/N] ")
		answer, _ := bufio.NewReader(stdin).ReadString('\n')
		if a := strings.ToLower(strings.TrimSpace(answer)); a != "y" && a != "yes" {
			return errors.New("not installed")
		}
	}
	if _, err := host.Install(ctx, bin); err != nil {
		return err
	}
	if host.Shared() {
		fmt.Fprintf(stdout, "Installed %s %s (sha256 %s) in the database. Every replica loads it within its --reconcile-interval.\n", s.Name, s.Version, s.SHA256)
		return nil
	}
	fmt.Fprintf(stdout, "Installed %s %s (sha256 %s). Restart companion to load it.\n", s.Name, s.Version, s.SHA256)
	return nil
}

func providersList(ctx context.Context, where storeAt, asJSON bool, stdout, stderr io.Writer) error {
	host, _, closeAll, err := openHost(ctx, where, stderr)
	if err != nil {
		return err
	}
	defer closeAll()
	mods, err := host.Installed(ctx)
	if err != nil {
		return err
	}
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(mods)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tVERSION\tKIND\tSTATUS\tSHA256\tHOSTS")
	for _, m := range mods {
		kind := "installed"
		if m.Builtin {
			kind = "first-party"
		}
		status := m.Status
		if m.Problem != "" {
			status += ": " + m.Problem
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%.12s\t%s\n", m.Name, m.Version, kind, status, m.SHA256, strings.Join(m.Hosts, ","))
	}
	return tw.Flush()
}

func providersRemove(ctx context.Context, where storeAt, args []string, stdout, stderr io.Writer) error {
	name, err := oneArg(args, "module name")
	if err != nil {
		return err
	}
	host, store, closeAll, err := openHost(ctx, where, stderr)
	if err != nil {
		return err
	}
	defer closeAll()
	if err := checkRemovable(ctx, host, store, name); err != nil {
		return err
	}
	if err := host.Remove(ctx, name); err != nil {
		return err
	}
	if host.Shared() {
		fmt.Fprintf(stdout, "Removed %s from the database. Every replica unloads it within its --reconcile-interval.\n", name)
		return nil
	}
	fmt.Fprintf(stdout, "Removed %s.\n", name)
	return nil
}

func providersPack(manifestPath, out string, args []string, stdout io.Writer) error {
	in, err := oneArg(args, "input module")
	if err != nil {
		return err
	}
	if manifestPath == "" || out == "" {
		return errors.New("--manifest and -o are required")
	}
	bin, err := os.ReadFile(in)
	if err != nil {
		return err
	}
	man, err := os.ReadFile(manifestPath)
	if err != nil {
		return err
	}
	packed, err := wasm.Pack(bin, man)
	if err != nil {
		return err
	}
	if err := os.WriteFile(out, packed, 0o644); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "Wrote %s.\n", out)
	return nil
}

// readModuleFile reads a module file, refusing one above the module size
// limit before reading it.
func readModuleFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.Size() > wasm.MaxModuleBytes {
		return nil, fmt.Errorf("%s is %d bytes; a module may be at most %d bytes (ABI.md, Limits)", path, st.Size(), wasm.MaxModuleBytes)
	}
	return io.ReadAll(io.LimitReader(f, wasm.MaxModuleBytes+1))
}

// subcommand starts a "companion CMD SUB [flags]" command: with no SUB or
// a request for help it prints usage (exit 2 without SUB, 0 for help) and
// returns ok false; otherwise it returns SUB, the remaining arguments and
// a flag set for them that prints usage on error.
func subcommand(cmd, usage string, args []string, stdout, stderr io.Writer) (sub string, rest []string, fs *flag.FlagSet, code int, ok bool) {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprint(stdout, usage)
		if len(args) == 0 {
			return "", nil, nil, 2, false
		}
		return "", nil, nil, 0, false
	}
	fs = flag.NewFlagSet("companion "+cmd+" "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, usage) }
	return args[0], args[1:], fs, 0, true
}
