package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/db"
	"github.com/canvasapp/companion/providers/builtin/docker"
)

const accountsUsage = `Usage:
  companion accounts add PROVIDER --label LABEL [--config KEY=VALUE]... [--json]
                     [--user NAME [--shared]]
                     [--data-dir DIR | --database-file FILE]
                     [--secrets keyring|sealed] [--secret-key-file FILE]
        add a provider account. Its token is read from stdin, never from the
        command line, e.g.
            companion accounts add daytona --label team < daytona-token
        (a provider that takes several credentials reads NAME=VALUE lines).
        The token is checked with one list call at the provider first.
        On a serve installation with users, --user names the owner (it is
        required there: an account without one is nobody's); --shared, for
        an admin's account, lets every user make workspaces on it, each
        workspace staying its creator's.
  companion accounts list [--user NAME] [--data-dir DIR | --database-file FILE] [--json]
        list the accounts (never their tokens); with --user, only those that
        user sees (theirs and the shared ones)
  companion accounts remove ID [--user NAME] [--data-dir DIR | --database-file FILE]
                     [--secrets keyring|sealed] [--secret-key-file FILE]
        forget an account and delete its credentials; its boxes at the
        provider are left alone. With --user, only an account of that user

add and remove work on the data dir directly and need companion stopped;
while it runs, use its HTTP API instead (POST /v1/accounts,
DELETE /v1/accounts/{id}; see ui-bridge/API.md). They keep tokens where
companion does: the OS keyring, or the sealed store with --secrets sealed
(see "companion secrets --help").

With --database URL or --database-file FILE (an installation whose serve
replicas keep their state in PostgreSQL) they work on that database
instead, while the replicas run: every replica reads accounts from it.
Use the sealed store there (the same --secret-key-file as serve), so every
replica can read the token.
`

// actorCLI names the offline commands in the audit trail.
const actorCLI = "cli"

// offlineLockWait is how long an offline command waits for the data dir's
// lock: long enough for a companion that is stopping, short enough to say
// soon that one is running.
const offlineLockWait = 2 * time.Second

// maxCredentialInput bounds what is read from stdin for credentials.
const maxCredentialInput = 64 << 10

func runAccounts(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	sub, rest, fs, code, ok := subcommand("accounts", accountsUsage, args, stdout, stderr)
	if !ok {
		return code
	}
	dataDir := fs.String("data-dir", defaultDataDir(), "companion's data `directory`")
	label := fs.String("label", "", "the account's `name` as people see it (add)")
	var config stringList
	fs.Var(&config, "config", "a provider setting `KEY=VALUE`, e.g. api_url=https://… (add; repeatable)")
	asJSON := fs.Bool("json", false, "print JSON")
	user := fs.String("user", "", "the user `NAME` that owns the account (serve installations with users)")
	dbf := addStoreFlags(fs)
	shared := fs.Bool("shared", false, "let every user make workspaces on the account (add; --user must be an admin)")
	var sf secretFlags
	sf.addFlags(fs)
	// Flags may come after the argument ("add daytona --label x").
	pos, code, ok := parseFlags(fs, rest)
	if !ok {
		return code
	}
	if err := sf.check(); err != nil {
		fmt.Fprintf(stderr, "companion accounts %s: %v\n", sub, err)
		return 2
	}
	dbURL, err := dbf.resolve()
	if err != nil {
		fmt.Fprintf(stderr, "companion accounts %s: %v\n", sub, err)
		return 2
	}
	ctx := context.Background()
	where := storeAt{dataDir: *dataDir, url: dbURL}
	switch sub {
	case "add":
		err = accountsAdd(ctx, where, sf, pos, *label, config, accountOwner{name: *user, shared: *shared}, *asJSON, stdin, stdout, stderr)
	case "list":
		err = accountsList(ctx, where, pos, *user, *asJSON, stdout)
	case "remove":
		err = accountsRemove(ctx, where, sf, pos, *user, stdout, stderr)
	default:
		fmt.Fprintf(stderr, "companion accounts: unknown subcommand %q\n\n%s", sub, accountsUsage)
		return 2
	}
	return subcommandResult("accounts", sub, err, stderr)
}

// offline is companion's core on a data dir, without a server: what the
// offline account commands act through, so they keep tokens and check
// them exactly as the HTTP routes do.
type offline struct {
	store serverStore
	reg   *core.Registry
	provs *providerSet
	svc   *core.Service
	close []func()
}

// storeAt is where an offline command finds the store: the data dir's
// SQLite file, or PostgreSQL when url is set (the data dir still holds
// the installed modules).
type storeAt struct {
	dataDir string
	url     string
}

// exists refuses a data dir without a database (PostgreSQL's is checked
// when it opens).
func (w storeAt) exists() error {
	if w.url != "" {
		return nil
	}
	path := sqlitePath(w.dataDir)
	if _, err := os.Stat(path); err != nil {
		return fmt.Errorf("no companion database at %s: %w", path, err)
	}
	return nil
}

// open opens the store; SQLite's must already exist when mustExist.
func (w storeAt) open(ctx context.Context, mustExist bool) (serverStore, error) {
	if mustExist {
		if err := w.exists(); err != nil {
			return nil, err
		}
	}
	if w.url != "" {
		return db.OpenPostgres(ctx, w.url)
	}
	return db.Open(ctx, sqlitePath(w.dataDir))
}

// openOffline takes the data dir's lock (SQLite only: replicas on
// PostgreSQL run while it works, and read accounts from the database),
// opens the store and the secret store (which fails first, before
// anything is written, when no store can keep a token), the providers and
// the lifecycle service. route is the HTTP route to suggest when a
// running companion holds the lock.
func openOffline(ctx context.Context, where storeAt, sf secretFlags, route string, stderr io.Writer) (_ *offline, err error) {
	o, keys, log, err := openOfflineSecrets(ctx, where, sf, "while it runs, use its HTTP API instead: "+route+" (ui-bridge/API.md)", stderr)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			o.Close()
		}
	}()
	o.reg = &core.Registry{}
	o.provs, err = startProviders(ctx, &serverFlags{dataDir: where.dataDir, dockerImage: docker.DefaultImage, dockerScope: docker.DefaultScope}, o.store, keys, log, o.reg, nil, nil)
	if err != nil {
		return nil, err
	}
	o.close = append(o.close, func() { o.provs.Close() })
	o.provs.Start()
	o.svc, err = core.NewService(ctx, core.Config{Store: o.store, Providers: o.reg, Secrets: keys, Logger: log})
	if err != nil {
		return nil, err
	}
	o.close = append(o.close, func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		o.svc.Close(sctx)
	})
	return o, nil
}

// openOfflineSecrets is the first half of openOffline: the lock, the
// store and the secret store, for commands that need no providers. busy
// is the advice given when a running companion holds the lock.
func openOfflineSecrets(ctx context.Context, where storeAt, sf secretFlags, busy string, stderr io.Writer) (_ *offline, _ core.Secrets, _ *slog.Logger, err error) {
	dataDir := where.dataDir
	o := &offline{}
	defer func() {
		if err != nil {
			o.Close()
		}
	}()
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, nil, nil, fmt.Errorf("create data dir: %w", err)
	}
	if where.url == "" {
		unlock, err := lockDataDir(ctx, dataDir, offlineLockWait, nil)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("%w; %s", err, busy)
		}
		o.close = append(o.close, unlock)
	}
	o.store, err = where.open(ctx, false)
	if err != nil {
		return nil, nil, nil, err
	}
	o.close = append(o.close, func() { o.store.Close() })
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	keys, err := openSecretStore(ctx, useServer, sf, o.store, log)
	if err != nil {
		return nil, nil, nil, err
	}
	return o, keys, log, nil
}

// Close releases what openOffline opened, in reverse order.
func (o *offline) Close() {
	for i := len(o.close) - 1; i >= 0; i-- {
		o.close[i]()
	}
	o.close = nil
}

func accountsAdd(ctx context.Context, where storeAt, sf secretFlags, pos []string, label string, config []string, who accountOwner, asJSON bool, stdin io.Reader, stdout, stderr io.Writer) error {
	provider, err := oneArg(pos, "provider name")
	if err != nil {
		return err
	}
	cfg := map[string]string{}
	for _, kv := range config {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return fmt.Errorf("--config %q: want KEY=VALUE", kv)
		}
		cfg[k] = v
	}
	o, err := openOffline(ctx, where, sf, "POST /v1/accounts", stderr)
	if err != nil {
		return err
	}
	defer o.Close()
	owner, err := who.resolve(ctx, o.store)
	if err != nil {
		return err
	}
	p, ok := o.reg.Lookup(provider)
	if !ok {
		return fmt.Errorf("unknown provider %q; `companion providers list` shows the installed ones", provider)
	}
	info, err := p.Describe(ctx)
	if err != nil {
		return err
	}
	creds, err := readCredentials(stdin, info, stderr)
	if err != nil {
		return err
	}
	acct, err := o.svc.AddAccount(core.WithActor(ctx, actorCLI), owner, core.AddAccountRequest{
		Provider: provider, Label: label, Config: cfg, Credentials: creds, Shared: who.shared,
	})
	if err != nil {
		return err
	}
	if asJSON {
		return json.NewEncoder(stdout).Encode(map[string]any{"account": acct})
	}
	fmt.Fprintf(stdout, "Added account %s (%s, %q)%s.\n", acct.ID, acct.Provider, acct.Label, who.describe())
	return nil
}

// readCredentials reads the provider's credentials from stdin: the whole
// input (white space around it dropped) when it takes one, NAME=VALUE
// lines when it takes several. From a terminal it asks for each.
func readCredentials(stdin io.Reader, info core.ProviderInfo, stderr io.Writer) (map[string]string, error) {
	specs := info.Credentials
	if len(specs) == 0 {
		return nil, nil
	}
	if f, ok := stdin.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			return promptCredentials(f, specs, info.Name, stderr)
		}
	}
	b, err := io.ReadAll(io.LimitReader(stdin, maxCredentialInput+1))
	if err != nil {
		return nil, fmt.Errorf("read the token from stdin: %w", err)
	}
	if len(b) > maxCredentialInput {
		return nil, fmt.Errorf("stdin holds more than %d bytes; it should hold the token only", maxCredentialInput)
	}
	in := strings.TrimSpace(string(b))
	hint := fmt.Sprintf("pipe the token into stdin, e.g. `companion accounts add %s --label LABEL < token-file`", info.Name)
	if len(specs) == 1 {
		if in == "" {
			return nil, fmt.Errorf("no %s on stdin: %s", specs[0].Name, hint)
		}
		return map[string]string{specs[0].Name: in}, nil
	}
	creds := map[string]string{}
	for line := range strings.Lines(in) {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			return nil, fmt.Errorf("provider %s takes %s; give them on stdin as NAME=VALUE lines", info.Name, credentialNames(specs))
		}
		creds[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	if len(creds) == 0 {
		return nil, fmt.Errorf("no credentials on stdin: provider %s takes %s as NAME=VALUE lines", info.Name, credentialNames(specs))
	}
	return creds, nil
}

func promptCredentials(tty *os.File, specs []core.CredentialSpec, provider string, stderr io.Writer) (map[string]string, error) {
	fmt.Fprintln(stderr, "The input is shown as you type; to avoid that, pipe the token in from a file.")
	r := bufio.NewReader(tty)
	creds := map[string]string{}
	for _, c := range specs {
		what := c.Name
		if c.Description != "" {
			what += " (" + c.Description + ")"
		}
		fmt.Fprintf(stderr, "%s %s: ", provider, what)
		line, err := r.ReadString('\n')
		if err != nil && line == "" {
			return nil, fmt.Errorf("read %s: %w", c.Name, err)
		}
		creds[c.Name] = strings.TrimSpace(line)
	}
	return creds, nil
}

func credentialNames(specs []core.CredentialSpec) string {
	var names []string
	for _, c := range specs {
		names = append(names, c.Name)
	}
	return strings.Join(names, ", ")
}

// accountsList reads the accounts without the lock or the secret store:
// it reads names only, and a running companion does not mind.
func accountsList(ctx context.Context, where storeAt, pos []string, user string, asJSON bool, stdout io.Writer) error {
	if len(pos) != 0 {
		return fmt.Errorf("unexpected argument %q (see --help)", pos[0])
	}
	store, err := where.open(ctx, true)
	if err != nil {
		return err
	}
	defer store.Close()
	list, err := store.ListAccounts(ctx)
	if err != nil {
		return err
	}
	if user != "" {
		if list, err = seenBy(ctx, store, user, list); err != nil {
			return err
		}
	}
	sort.SliceStable(list, func(i, j int) bool { return list[i].CreatedAt.Before(list[j].CreatedAt) })
	if asJSON {
		if list == nil {
			list = []core.Account{}
		}
		return json.NewEncoder(stdout).Encode(map[string]any{"accounts": list})
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tPROVIDER\tLABEL\tCREDENTIALS\tCREATED")
	for _, a := range list {
		creds := strings.Join(a.Credentials, ",")
		if creds == "" {
			creds = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", a.ID, a.Provider, a.Label, creds, a.CreatedAt.Format(time.RFC3339))
	}
	return tw.Flush()
}

func accountsRemove(ctx context.Context, where storeAt, sf secretFlags, pos []string, user string, stdout, stderr io.Writer) error {
	id, err := oneArg(pos, "account id")
	if err != nil {
		return err
	}
	if err := where.exists(); err != nil {
		return err
	}
	o, err := openOffline(ctx, where, sf, "DELETE /v1/accounts/"+id, stderr)
	if err != nil {
		return err
	}
	defer o.Close()
	acct, err := o.store.GetAccount(ctx, id)
	if err == nil && user != "" {
		err = ownedBy(ctx, o.store, user, acct)
	}
	if err != nil {
		if core.IsKind(err, core.KindNotFound) {
			return fmt.Errorf("account %q not found; `companion accounts list` shows them", id)
		}
		return err
	}
	// The operator may remove any owner's account.
	if err := o.svc.RemoveAccount(core.WithActor(ctx, actorCLI), acct.Owner, id); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "Removed account %s (%s, %q); its boxes at %s were left alone.\n", acct.ID, acct.Provider, acct.Label, acct.Provider)
	return nil
}
