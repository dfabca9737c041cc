// Command companion manages the sandboxes where people's coding agents run,
// for Canvas desktop (companion desktop) and Canvas web (companion serve).
//
// This package only wires: flags, logging, the store, the secret store, the
// provider adapters, the lifecycle service and the HTTP/WebSocket bridge.
package main

import (
	"fmt"
	"io"
	"os"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

const usage = `companion manages the sandboxes where coding agents run.

Usage:
  companion desktop [flags]    run for Canvas desktop: loopback only, prints one
                               ready line (JSON) on stdout, exits when stdin closes
  companion serve [flags]      run the always-on server for Canvas web
  companion providers ...      install, list and remove Wasm provider modules
  companion accounts ...       add, list and remove provider accounts (token on stdin)
  companion secrets ...        make and rotate the key of the sealed secret store
  companion export-store ...   keep the keys of an export bucket in the secret store
  companion audit verify       check the audit trail's hash chain
  companion migrate sqlite-to-postgres   copy a data dir's database into PostgreSQL
  companion users ...          add, list, remove local users of serve --auth local
  companion tokens ...         create, list, revoke users' personal API tokens
  companion version            print the version
  companion help [command]     show help for a command

Run "companion <command> --help" for the flags of a command.
`

// run is main without the process: it returns the exit code.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "desktop":
		return runServer(modeDesktop, rest, stdin, stdout, stderr)
	case "serve":
		return runServer(modeServe, rest, stdin, stdout, stderr)
	case "providers":
		return runProviders(rest, stdin, stdout, stderr)
	case "audit":
		return runAudit(rest, stdout, stderr)
	case "accounts":
		return runAccounts(rest, stdin, stdout, stderr)
	case "secrets":
		return runSecrets(rest, stdout, stderr)
	case "export-store":
		return runExportStore(rest, stdin, stdout, stderr)
	case "migrate":
		return runMigrate(rest, stdout, stderr)
	case "users":
		return runUsers(rest, stdin, stdout, stderr)
	case "tokens":
		return runTokens(rest, stdout, stderr)
	case "version", "--version", "-version":
		fmt.Fprintf(stdout, "companion %s\n", version)
		return 0
	case "help", "-h", "-help", "--help":
		if len(rest) > 0 {
			return run([]string{rest[0], "--help"}, stdin, stdout, stderr)
		}
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "companion: unknown command %q\n\n%s", cmd, usage)
		return 2
	}
}
