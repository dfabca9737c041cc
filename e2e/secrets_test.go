package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/db"
	"github.com/canvasapp/companion/e2e/emulators/daytona"
	"github.com/canvasapp/companion/e2e/emulators/emulator"
	"github.com/canvasapp/companion/internal/testsupport"
)

// The token these tests add, recognisable in any encoding (leakForms).
const sealedToken = "tok-SEALED-e2e-9b3c7f21d4a8"

// noKeyring is an environment in which no Secret Service answers.
var noKeyring = []string{"DBUS_SESSION_BUS_ADDRESS=unix:path=/nonexistent/companion-e2e-bus", "CREDENTIALS_DIRECTORY="}

// seen collects everything a test got back from companion (response
// bodies, CLI output, logs, WebSocket frames) to look for the token in.
type seen struct{ bytes.Buffer }

func (s *seen) add(where string, b []byte) { fmt.Fprintf(s, "\n--- %s\n%s", where, b) }

// assertTokenNowhere fails if any form of tok is in text or in any file
// under dir (the database, its WAL, modules, caches: every byte).
func assertTokenNowhere(t *testing.T, tok, dir string, text []byte) {
	t.Helper()
	forms := leakForms(tok)
	for name, form := range forms {
		if bytes.Contains(text, []byte(form)) {
			t.Errorf("the token (%s) is in what companion answered, logged or streamed", name)
		}
	}
	files := 0
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		files++
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for name, form := range forms {
			if bytes.Contains(b, []byte(form)) {
				t.Errorf("the token (%s) is in %s", name, path)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files == 0 {
		t.Fatalf("no files under %s to check", dir)
	}
}

// runCLI runs a companion subcommand to its end.
func runCLI(t *testing.T, env []string, stdin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	return runCommand(t, env, strings.NewReader(stdin), args...)
}

// runCommand runs a companion subcommand to its end, stdin read from in;
// with in nil, stdin stays open until it exits, as an app that starts
// desktop holds it (closed, desktop would stop rather than refuse).
func runCommand(t *testing.T, env []string, in io.Reader, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, companionBin, args...)
	cmd.Env = append(os.Environ(), env...)
	if in != nil {
		cmd.Stdin = in
	} else {
		held, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		defer held.Close()
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee) && ctx.Err() == nil:
		code = ee.ExitCode()
	default:
		t.Fatalf("companion %s: %v\n%s", strings.Join(args, " "), err, errb.String())
	}
	return out.String(), errb.String(), code
}

// startRefused runs a server command that must refuse to start: it exits
// non-zero without printing a ready line. Its stdin stays open. It returns
// the logs.
func startRefused(t *testing.T, env []string, args ...string) string {
	t.Helper()
	out, errs, code := runCommand(t, env, nil, args...)
	if code == 0 || strings.Contains(out, `"ready"`) {
		t.Fatalf("companion %s started (exit %d, stdout %q); want a refusal\n%s", strings.Join(args, " "), code, out, errs)
	}
	return errs
}

func genKey(t *testing.T, dir, name string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if _, errs, code := runCLI(t, nil, "", "secrets", "gen-key", "--out", path); code != 0 {
		t.Fatalf("gen-key: %s", errs)
	}
	return path
}

// daytonaAPI starts the Daytona emulator, accepting sealedToken only.
func daytonaAPI(t *testing.T) (*daytona.Server, string) {
	t.Helper()
	dt := daytona.New(daytona.Options{Token: sealedToken, Clock: emulator.NewWallClock(), Delays: &daytona.Delays{}})
	srv := httptest.NewServer(dt.Handler())
	t.Cleanup(func() { dt.Close(); srv.Close() })
	return dt, srv.URL + "/api"
}

// useAccount creates a Daytona workspace with the account, which needs its
// token, and waits for it to run.
func useAccount(p *proc, acctID, name string, out *seen) {
	p.t.Helper()
	var created struct{ Workspace workspace }
	raw := p.must(202, "POST", "/v1/workspaces", map[string]any{"account_id": acctID, "name": name}, &created)
	out.add("create", raw)
	p.waitState(created.Workspace.ID, "running", 60*time.Second)
}

type accountsList struct {
	Accounts []struct {
		ID       string `json:"id"`
		Provider string `json:"provider"`
		Label    string `json:"label"`
		Status   struct {
			State string `json:"state"`
		} `json:"status"`
	} `json:"accounts"`
}

// accountOK waits until GET /v1/accounts reports the account ok.
func (p *proc) accountOK(id string, out *seen) {
	p.t.Helper()
	testsupport.Poll(p.t, 30*time.Second, func() error {
		var l accountsList
		_, raw := p.call("GET", "/v1/accounts", nil, &l)
		out.add("accounts", raw)
		for _, a := range l.Accounts {
			if a.ID == id && a.Status.State == "ok" {
				return nil
			}
		}
		return fmt.Errorf("account %s not ok: %s", id, raw)
	})
}

// terminate stops serve as systemd would (SIGTERM) and waits for a clean
// exit.
func (p *proc) terminate() {
	p.t.Helper()
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		if p.exit != nil {
			p.t.Fatalf("companion exited with %v after SIGTERM\n%s", p.exit, p.stderr.String())
		}
	case <-time.After(30 * time.Second):
		p.t.Fatal("companion did not exit after SIGTERM")
	}
}

func addedID(t *testing.T, stdout string) string {
	t.Helper()
	f := strings.Fields(stdout)
	if len(f) < 3 || f[0] != "Added" || !strings.HasPrefix(f[2], "acc") {
		t.Fatalf("accounts add printed %q", stdout)
	}
	return f[2]
}

// TestSealedSecretsThroughServe runs serve with --secrets sealed and no
// keyring at all: accounts added over HTTP and with the CLI keep working
// across a restart and a key rotation, the old key is refused afterwards,
// and the token is nowhere in the data dir, the logs, the stream or any
// answer.
func TestSealedSecretsThroughServe(t *testing.T) {
	_, apiURL := daytonaAPI(t)
	data, keys := t.TempDir(), t.TempDir()
	k1 := genKey(t, keys, "k1")
	var out seen
	serveArgs := func(key string) []string {
		return []string{"--listen", "127.0.0.1:0", "--docker-scope", "unused", "--secrets", "sealed", "--secret-key-file", key}
	}

	// An account added with the CLI before the first start.
	stdout, errs, code := runCLI(t, noKeyring, sealedToken+"\n", "accounts", "add", "daytona", "--label", "cli team",
		"--config", "api_url="+apiURL, "--data-dir", data, "--secrets", "sealed", "--secret-key-file", k1)
	out.add("cli add", []byte(stdout+errs))
	if code != 0 {
		t.Fatalf("accounts add (sealed): exit %d\n%s", code, errs)
	}
	cliAcct := addedID(t, stdout)

	p := start(t, options{mode: "serve", dataDir: data, env: noKeyring, args: serveArgs(k1)})
	s := p.dial(-1)
	s.next(10 * time.Second)
	var added struct {
		Account struct{ ID string } `json:"account"`
	}
	raw := p.must(201, "POST", "/v1/accounts", map[string]any{
		"provider": "daytona", "label": "http team", "config": map[string]string{"api_url": apiURL},
		"credentials": map[string]string{"token": sealedToken},
	}, &added)
	out.add("http add", raw)
	httpAcct := added.Account.ID
	p.accountOK(cliAcct, &out)
	useAccount(p, cliAcct, "sealed-cli", &out)
	useAccount(p, httpAcct, "sealed-http", &out)

	// While serve holds the data dir, the CLI says so and names the route.
	_, errs, code = runCLI(t, noKeyring, sealedToken, "accounts", "add", "daytona", "--label", "late",
		"--config", "api_url="+apiURL, "--data-dir", data, "--secret-key-file", k1)
	out.add("cli add while serving", []byte(errs))
	if code == 0 || !strings.Contains(errs, "another companion") || !strings.Contains(errs, "POST /v1/accounts") {
		t.Fatalf("accounts add while serve runs: exit %d: %s", code, errs)
	}
	// Checked while the server runs, so the WAL holds recent writes.
	assertTokenNowhere(t, sealedToken, data, nil)
	p.terminate()
	out.add("first serve's logs", []byte(p.stderr.String()))

	// Rotate: every entry re-sealed in one go; the old key is refused.
	k2 := genKey(t, keys, "k2")
	stdout, errs, code = runCLI(t, noKeyring, "", "secrets", "rotate-key", "--data-dir", data, "--secret-key-file", k1, "--new-secret-key-file", k2)
	out.add("rotate", []byte(stdout+errs))
	if code != 0 || !strings.Contains(stdout, "Re-encrypted") {
		t.Fatalf("rotate-key: exit %d\n%s%s", code, stdout, errs)
	}
	refused := startRefused(t, noKeyring, append([]string{"serve", "--data-dir", data}, serveArgs(k1)...)...)
	out.add("old key refused", []byte(refused))
	if !strings.Contains(refused, "wrong secret key") {
		t.Fatalf("serve with the old key: %s", refused)
	}
	// Without any key the sealed data dir is refused, even in auto mode.
	refused = startRefused(t, noKeyring, "serve", "--data-dir", data, "--listen", "127.0.0.1:0")
	if !strings.Contains(refused, "sealed") || !strings.Contains(refused, "--secret-key-file") {
		t.Fatalf("serve without a key on a sealed data dir: %s", refused)
	}

	p = start(t, options{mode: "serve", dataDir: data, env: noKeyring, args: serveArgs(k2)})
	s2 := p.dial(-1)
	s2.next(10 * time.Second)
	p.accountOK(cliAcct, &out)
	p.accountOK(httpAcct, &out)
	useAccount(p, cliAcct, "after-rotation-cli", &out)
	useAccount(p, httpAcct, "after-rotation-http", &out)
	assertTokenNowhere(t, sealedToken, data, nil)
	p.terminate()

	// The CLI lists and removes with the new key; the removed account's
	// secret is gone from the store.
	stdout, _, code = runCLI(t, noKeyring, "", "accounts", "list", "--data-dir", data)
	out.add("list", []byte(stdout))
	if code != 0 || !strings.Contains(stdout, cliAcct) || !strings.Contains(stdout, httpAcct) {
		t.Fatalf("accounts list: %s", stdout)
	}
	stdout, errs, code = runCLI(t, noKeyring, "", "accounts", "remove", cliAcct, "--data-dir", data, "--secret-key-file", k2)
	out.add("remove", []byte(stdout+errs))
	if code != 0 {
		t.Fatalf("accounts remove: %s", errs)
	}
	_, errs, code = runCLI(t, noKeyring, "", "accounts", "remove", "acc_nosuch", "--data-dir", data, "--secret-key-file", k2)
	if code == 0 || !strings.Contains(errs, "not found") {
		t.Fatalf("remove of an unknown id: exit %d: %s", code, errs)
	}
	store, err := db.Open(context.Background(), filepath.Join(data, "companion.db"))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := store.SealedSecret(context.Background(), core.CredentialKey(cliAcct, "token")); !core.IsKind(err, core.KindNotFound) {
		t.Errorf("the removed account's token is still stored: %v", err)
	}
	if _, _, err := store.SealedSecret(context.Background(), core.CredentialKey(httpAcct, "token")); err != nil {
		t.Errorf("the other account's token: %v", err)
	}
	store.Close()

	out.add("serve logs", []byte(p.stderr.String()))
	out.add("stream 1", []byte(s.seen.String()))
	out.add("stream 2", []byte(s2.seen.String()))
	assertTokenNowhere(t, sealedToken, data, out.Bytes())
}

// TestNoKeyringNoKeyRefuses: with no Secret Service and no key, serve
// refuses to start and accounts add fails before anything is written or
// any provider is called; a key file others can read is refused.
func TestNoKeyringNoKeyRefuses(t *testing.T) {
	dt, apiURL := daytonaAPI(t)
	data := t.TempDir()

	logs := startRefused(t, noKeyring, "serve", "--data-dir", data, "--listen", "127.0.0.1:0")
	for _, want := range []string{"keyring does not answer", "--secrets sealed", "--secret-key-file", "gen-key"} {
		if !strings.Contains(logs, want) {
			t.Errorf("serve's refusal does not say %q:\n%s", want, logs)
		}
	}

	_, errs, code := runCLI(t, noKeyring, sealedToken+"\n", "accounts", "add", "daytona", "--label", "x",
		"--config", "api_url="+apiURL, "--data-dir", data)
	if code != 1 || !strings.Contains(errs, "--secret-key-file") || strings.Contains(errs, sealedToken) {
		t.Fatalf("accounts add without a secret store: exit %d: %s", code, errs)
	}
	_, errs, code = runCLI(t, noKeyring, sealedToken+"\n", "accounts", "add", "daytona", "--label", "x",
		"--config", "api_url="+apiURL, "--data-dir", data, "--secrets", "sealed")
	if code != 1 || !strings.Contains(errs, "needs a key") {
		t.Fatalf("accounts add --secrets sealed without a key: exit %d: %s", code, errs)
	}

	// A key file others can read is refused, with the fix.
	key := genKey(t, t.TempDir(), "key")
	if err := os.Chmod(key, 0o644); err != nil {
		t.Fatal(err)
	}
	logs = startRefused(t, noKeyring, "serve", "--data-dir", data, "--listen", "127.0.0.1:0", "--secret-key-file", key)
	if !strings.Contains(logs, "chmod 600") {
		t.Fatalf("serve with a 0644 key: %s", logs)
	}
	_, errs, code = runCLI(t, noKeyring, sealedToken, "accounts", "add", "daytona", "--label", "x",
		"--config", "api_url="+apiURL, "--data-dir", data, "--secret-key-file", key)
	if code != 1 || !strings.Contains(errs, "chmod 600") {
		t.Fatalf("accounts add with a 0644 key: exit %d: %s", code, errs)
	}

	// Nothing half-written: no account, no secret, no provider call.
	store, err := db.Open(context.Background(), filepath.Join(data, "companion.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	accts, err := store.ListAccounts(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range accts {
		if a.Provider == "daytona" {
			t.Fatalf("a failed add left account %s", a.ID)
		}
	}
	if n, err := store.CountSealedSecrets(context.Background()); err != nil || n != 0 {
		t.Fatalf("%d sealed secrets after failed adds (%v)", n, err)
	}
	if n := len(dt.Requests().All()); n != 0 {
		t.Fatalf("the provider got %d requests from failed adds", n)
	}
	assertTokenNowhere(t, sealedToken, data, nil)
}

// TestKeyringSecretsThroughCLIAndDesktop is the keyring mode's twin of
// the sealed test: an account added with the CLI (token on stdin) is used
// by desktop, and the token is only in the keyring.
func TestKeyringSecretsThroughCLIAndDesktop(t *testing.T) {
	data := t.TempDir()
	keyringOf(t, data) // skips unless a keyring answers (or is required)
	_, apiURL := daytonaAPI(t)
	var out seen

	stdout, errs, code := runCLI(t, nil, sealedToken+"\n", "accounts", "add", "daytona", "--label", "kr team",
		"--config", "api_url="+apiURL, "--data-dir", data)
	out.add("cli add", []byte(stdout+errs))
	if code != 0 {
		t.Fatalf("accounts add (keyring): exit %d\n%s", code, errs)
	}
	acct := addedID(t, stdout)
	if v, err := keyringOf(t, data).Get(context.Background(), core.CredentialKey(acct, "token")); err != nil || v != sealedToken {
		t.Fatalf("the token is not in the keyring: %v", err)
	}

	p := start(t, options{dataDir: data, args: []string{"--docker-scope", "unused"}})
	s := p.dial(-1)
	s.next(10 * time.Second)
	p.accountOK(acct, &out)
	useAccount(p, acct, "keyring-cli", &out)
	_, errs, code = runCLI(t, nil, "", "accounts", "remove", acct, "--data-dir", data)
	if code == 0 || !strings.Contains(errs, "DELETE /v1/accounts/"+acct) {
		t.Fatalf("accounts remove while desktop runs: exit %d: %s", code, errs)
	}
	assertTokenNowhere(t, sealedToken, data, nil)
	p.stop()

	// Removed with the CLI, the account takes its keyring entry along.
	stdout, errs, code = runCLI(t, nil, "", "accounts", "remove", acct, "--data-dir", data)
	out.add("remove", []byte(stdout+errs))
	if code != 0 {
		t.Fatalf("accounts remove: %s", errs)
	}
	if _, err := keyringOf(t, data).Get(context.Background(), core.CredentialKey(acct, "token")); !core.IsKind(err, core.KindNotFound) {
		t.Fatalf("the removed account's token is still in the keyring: %v", err)
	}
	out.add("logs", []byte(p.stderr.String()))
	out.add("stream", []byte(s.seen.String()))
	assertTokenNowhere(t, sealedToken, data, out.Bytes())
}
