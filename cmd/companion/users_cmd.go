package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"golang.org/x/term"

	"github.com/canvasapp/companion/auth"
	"github.com/canvasapp/companion/db"
)

const usersUsage = `Usage:
  companion users add [--data-dir DIR | --database-file FILE] [--admin] NAME
        create a local user for companion serve --auth local; the password
        is read from the terminal (not echoed) or from stdin, never from
        the command line. The first user is an admin.
  companion users list [--data-dir DIR | --database-file FILE]
  companion users remove [--data-dir DIR | --database-file FILE] NAME
        delete a user with their sessions and API tokens
  companion users passwd [--data-dir DIR | --database-file FILE] NAME
        set a new password; every session of the user ends

These work while companion serve runs on the same data dir.
`

const tokensUsage = `Usage:
  companion tokens create --user NAME [--label TEXT] [--expires 720h] [--scope metrics] [--data-dir DIR | --database-file FILE]
        make a personal API token, printed once on stdout; scripts send it
        as "Authorization: Bearer TOKEN". --expires 0 means it never expires.
        --scope metrics makes one that may read GET /metrics and nothing
        else (for a Prometheus server).
  companion tokens list --user NAME [--data-dir DIR | --database-file FILE]
  companion tokens revoke --user NAME [--data-dir DIR | --database-file FILE] TOKEN_ID
`

// openAuth opens the store serve uses (PostgreSQL when dbf names one, else
// the data dir's SQLite file) and the login service on it.
func openAuth(ctx context.Context, dataDir string, dbf databaseFlags) (*auth.Service, func(), error) {
	u, err := dbf.resolve()
	if err != nil {
		return nil, nil, err
	}
	if u != "" {
		store, err := db.OpenPostgres(ctx, u)
		if err != nil {
			return nil, nil, err
		}
		return auth.New(auth.Config{Store: store}), func() { store.Close() }, nil
	}
	store, err := openDataDirStore(ctx, dataDir)
	if err != nil {
		return nil, nil, err
	}
	return auth.New(auth.Config{Store: store}), func() { store.Close() }, nil
}

// addStoreFlags gives users and tokens serve's --database and
// --database-file, for installations on PostgreSQL.
func addStoreFlags(fs *flag.FlagSet) *databaseFlags {
	var d databaseFlags
	fs.StringVar(&d.url, "database", "", "PostgreSQL `URL` serve keeps its state in, instead of SQLite in --data-dir; prefer --database-file")
	fs.StringVar(&d.file, "database-file", "", "`file` holding the PostgreSQL URL, instead of --database")
	return &d
}

func runUsers(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	sub, rest, fs, code, ok := subcommand("users", usersUsage, args, stdout, stderr)
	if !ok {
		return code
	}
	dataDir := fs.String("data-dir", defaultDataDir(), "companion's data `directory`")
	dbf := addStoreFlags(fs)
	admin := fs.Bool("admin", false, "make the user an admin (add)")
	names, code, ok := parseFlags(fs, rest)
	if !ok {
		return code
	}
	ctx := context.Background()
	err := func() error {
		if sub != "list" && len(names) != 1 {
			return fmt.Errorf("want exactly one user NAME (see --help)")
		}
		svc, done, err := openAuth(ctx, *dataDir, *dbf)
		if err != nil {
			return err
		}
		defer done()
		switch sub {
		case "add":
			pw, err := readPassword(stdin, stderr, "Password for "+names[0]+": ")
			if err != nil {
				return err
			}
			u, err := svc.AddLocalUser(ctx, names[0], pw, *admin)
			if err != nil {
				return err
			}
			fmt.Fprintf(stdout, "added user %s (%s)%s\n", u.Name, u.ID, map[bool]string{true: ", admin"}[u.Admin])
		case "list":
			us, err := svc.ListUsers(ctx)
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tISSUER\tADMIN\tID\tCREATED")
			for _, u := range us {
				fmt.Fprintf(tw, "%s\t%s\t%v\t%s\t%s\n", u.Name, u.Issuer, u.Admin, u.ID, u.CreatedAt.Format(time.RFC3339))
			}
			return tw.Flush()
		case "remove":
			u, err := svc.FindUser(ctx, names[0])
			if err != nil {
				return err
			}
			if err := svc.RemoveUser(ctx, u.ID); err != nil {
				return err
			}
			fmt.Fprintf(stdout, "removed user %s; their sessions and API tokens no longer work (a running serve closes their streams within its --stream-recheck), and their accounts and workspaces go to the first admin when serve next starts\n", u.Name)
		case "passwd":
			u, err := svc.FindUser(ctx, names[0])
			if err != nil {
				return err
			}
			if u.Issuer != auth.IssuerLocal {
				return fmt.Errorf("user %s signs in through %s, not with a password", u.Name, u.Issuer)
			}
			pw, err := readPassword(stdin, stderr, "New password for "+u.Name+": ")
			if err != nil {
				return err
			}
			if err := svc.SetPassword(ctx, u.ID, pw); err != nil {
				return err
			}
			fmt.Fprintf(stdout, "password of %s changed; their sessions have ended\n", u.Name)
		default:
			return fmt.Errorf("unknown subcommand %q (see --help)", sub)
		}
		return nil
	}()
	return subcommandResult("users", sub, err, stderr)
}

// readPassword reads a password from the terminal without echo (asking
// twice), or as the first line of stdin when stdin is not a terminal.
func readPassword(stdin io.Reader, stderr io.Writer, prompt string) (string, error) {
	if f, ok := stdin.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		fmt.Fprint(stderr, prompt)
		a, err := term.ReadPassword(int(f.Fd()))
		fmt.Fprintln(stderr)
		if err != nil {
			return "", fmt.Errorf("read password: %w", err)
		}
		fmt.Fprint(stderr, "Again: ")
		b, err := term.ReadPassword(int(f.Fd()))
		fmt.Fprintln(stderr)
		if err != nil {
			return "", fmt.Errorf("read password: %w", err)
		}
		if string(a) != string(b) {
			return "", errors.New("the two passwords differ; nothing was changed")
		}
		return string(a), nil
	}
	line, err := bufio.NewReader(stdin).ReadString('\n')
	if err != nil && (!errors.Is(err, io.EOF) || line == "") {
		return "", errors.New("no password on stdin: pipe it in (printf '%s\\n' \"$PW\" | companion users ...) or run from a terminal")
	}
	return strings.TrimRight(line, "\r\n"), nil
}

func runTokens(args []string, stdout, stderr io.Writer) int {
	sub, rest, fs, code, ok := subcommand("tokens", tokensUsage, args, stdout, stderr)
	if !ok {
		return code
	}
	dataDir := fs.String("data-dir", defaultDataDir(), "companion's data `directory`")
	dbf := addStoreFlags(fs)
	user := fs.String("user", "", "the user `NAME` the token belongs to")
	label := fs.String("label", "", "a `label` to recognise the token by (create)")
	expires := fs.Duration("expires", 720*time.Hour, "lifetime (create); 0 means never")
	scope := fs.String("scope", "", "what the token may do (create): empty for everything the user may, or `metrics` for GET /metrics only (a Prometheus server's)")
	ids, code, ok := parseFlags(fs, rest)
	if !ok {
		return code
	}
	ctx := context.Background()
	err := func() error {
		if *user == "" {
			return errors.New("--user NAME is required")
		}
		if (sub == "revoke") != (len(ids) == 1) || len(ids) > 1 {
			return fmt.Errorf("unexpected arguments %q (see --help)", ids)
		}
		svc, done, err := openAuth(ctx, *dataDir, *dbf)
		if err != nil {
			return err
		}
		defer done()
		u, err := svc.FindUser(ctx, *user)
		if err != nil {
			return err
		}
		switch sub {
		case "create":
			secret, t, err := svc.CreateScopedToken(ctx, u.ID, *label, *scope, *expires)
			if err != nil {
				return err
			}
			exp := "never expires"
			if !t.ExpiresAt.IsZero() {
				exp = "expires " + t.ExpiresAt.UTC().Format(time.RFC3339)
			}
			fmt.Fprintf(stderr, "token %s for %s, %s; it is shown only now:\n", t.ID, u.Name, exp)
			fmt.Fprintln(stdout, secret)
		case "list":
			ts, err := svc.ListTokens(ctx, u.ID)
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tLABEL\tSCOPE\tCREATED\tEXPIRES")
			for _, t := range ts {
				exp := "never"
				if !t.ExpiresAt.IsZero() {
					exp = t.ExpiresAt.UTC().Format(time.RFC3339)
				}
				sc := t.Scope
				if sc == "" {
					sc = "all"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", t.ID, t.Label, sc, t.CreatedAt.UTC().Format(time.RFC3339), exp)
			}
			return tw.Flush()
		case "revoke":
			if err := svc.RevokeToken(ctx, u.ID, ids[0]); err != nil {
				return err
			}
			fmt.Fprintf(stdout, "revoked token %s of %s\n", ids[0], u.Name)
		default:
			return fmt.Errorf("unknown subcommand %q (see --help)", sub)
		}
		return nil
	}()
	return subcommandResult("tokens", sub, err, stderr)
}
