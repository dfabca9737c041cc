package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/db"
	"github.com/canvasapp/companion/secrets"
)

// secretFlags choose where provider tokens and box keys are kept: the OS
// keyring, or the sealed store (encrypted rows of the database, under a key
// the operator supplies). There is no third, plaintext, choice.
type secretFlags struct {
	backend string // "", "keyring" or "sealed"
	keyFile string
}

func (s *secretFlags) addFlags(fs *flag.FlagSet) {
	fs.StringVar(&s.backend, "secrets", "", "where tokens are kept: `keyring|sealed` (the OS keyring, or encrypted in the database under --secret-key-file); default: the keyring on the desktop; for serve and the offline commands, sealed when a key is configured, else the keyring if it answers")
	fs.StringVar(&s.keyFile, "secret-key-file", "", "`file` with the sealed store's key (32 random bytes, raw, hex or base64; mode 0600, owned by you); make one with `companion secrets gen-key --out FILE`. Default: $CREDENTIALS_DIRECTORY/"+secrets.CredentialName+" when systemd passes it")
}

func (s *secretFlags) check() error {
	switch s.backend {
	case "", "keyring", "sealed":
		return nil
	}
	return fmt.Errorf("--secrets %q: want keyring or sealed", s.backend)
}

// secretsUse is who opens the secret store; it decides the default.
type secretsUse int

const (
	useDesktop secretsUse = iota // keyring unless told otherwise, not probed
	useServer                    // serve and the offline commands: probe
)

// keyringProbeTimeout bounds each call of the keyring probe: a Secret
// Service that does not answer within it is taken as absent.
const keyringProbeTimeout = 3 * time.Second

// noSecretStore is the advice given when neither store can be used.
const noSecretStore = "configure a secret key for the sealed store: make one with `companion secrets gen-key --out /etc/companion/secret-key` and start with --secrets sealed --secret-key-file /etc/companion/secret-key (or pass the key as the systemd credential " + secrets.CredentialName + "); on a desktop session, unlock the OS keyring instead. Tokens are never kept in plain text"

// openSecretStore opens the secret store the flags choose for the data dir
// of store, and describes it for the log. It fails, saying what to do,
// rather than start with a store that cannot keep a token.
func openSecretStore(ctx context.Context, use secretsUse, sf secretFlags, store instanceRows, log *slog.Logger) (core.Secrets, error) {
	instance, err := store.InstanceID(ctx)
	if err != nil {
		return nil, err
	}
	key, source, err := secrets.FindKey(sf.keyFile)
	if err != nil {
		return nil, err
	}
	sealedDir, err := secrets.IsSealed(ctx, store)
	if err != nil {
		return nil, err
	}
	backend := sf.backend
	if backend == "" {
		switch {
		case key != nil || sealedDir:
			backend = "sealed"
		case use == useDesktop:
			backend = "keyring"
		}
	}
	switch backend {
	case "sealed":
		if key == nil {
			what := "--secrets sealed needs a key"
			if sealedDir {
				what = "this data dir keeps its tokens sealed, and no key is configured"
			}
			return nil, fmt.Errorf("%s: %s", what, noSecretStore)
		}
		s, err := secrets.OpenSealed(ctx, store, instance, key)
		if err != nil {
			return nil, fmt.Errorf("open the sealed secret store with the key from %s: %w", source, err)
		}
		log.Info("secrets are sealed in the database", "key_id", s.KeyID(), "key_source", source)
		return s, nil
	case "keyring":
		if sf.keyFile != "" {
			return nil, errors.New("--secret-key-file is the key of --secrets sealed; with --secrets keyring, drop it")
		}
		if sealedDir {
			return nil, fmt.Errorf("this data dir keeps its tokens sealed in the database; start with --secrets sealed --secret-key-file FILE (the key they were sealed with), not --secrets keyring")
		}
		k := &secrets.Keyring{Namespace: instance}
		if use == useServer {
			if err := k.Probe(ctx, keyringProbeTimeout); err != nil {
				return nil, fmt.Errorf("--secrets keyring: the OS keyring does not work here (%v); %s", err, noSecretStore)
			}
			log.Info("secrets are kept in the OS keyring")
			return k, nil
		}
		// The desktop starts without a working keyring (it may be unlocked
		// later; accounts that need none still work), but says which it is.
		// The check reads a missing entry, which never prompts for an unlock
		// (a write would), and runs beside the start rather than hold it.
		check := *k
		check.Timeout = keyringProbeTimeout
		go func() {
			if err := check.Check(ctx); err != nil {
				if ctx.Err() == nil {
					log.Warn("secrets go to the OS keyring, which does not answer: adding or using an account with a token fails until it does", "err", err)
				}
				return
			}
			log.Info("secrets are kept in the OS keyring (it answered)")
		}()
		return k, nil
	}
	// Not chosen: a server takes the keyring when it answers.
	k := &secrets.Keyring{Namespace: instance}
	if err := k.Probe(ctx, keyringProbeTimeout); err != nil {
		return nil, fmt.Errorf("no secret store: the OS keyring does not answer (%v), and no secret key is configured; %s", err, noSecretStore)
	}
	log.Info("secrets are kept in the OS keyring (it answered; no secret key is configured)")
	return k, nil
}

const secretsUsage = `Usage:
  companion secrets gen-key [--out FILE]
        print a new secret key for the sealed store (32 random bytes in
        base64), or write it to FILE (created with mode 0600; never
        overwritten). Redirected to a file, stdout is made mode 0600 too.
  companion secrets rotate-key [--data-dir DIR] --secret-key-file OLD --new-secret-key-file NEW
        re-encrypt every sealed secret of the data dir with NEW, in one
        transaction: all of them or none. companion must be stopped; start it
        again with --secret-key-file NEW. OLD no longer opens them.

The sealed store keeps provider tokens and box keys encrypted in companion's
database (AES-256-GCM) for servers without an OS keyring: run companion with
--secrets sealed --secret-key-file FILE. Keep a copy of the key: without it
the tokens are lost (the accounts then need to be added again).
`

func runSecrets(args []string, stdout, stderr io.Writer) int {
	sub, rest, fs, code, ok := subcommand("secrets", secretsUsage, args, stdout, stderr)
	if !ok {
		return code
	}
	dataDir := fs.String("data-dir", defaultDataDir(), "companion's data `directory`")
	out := fs.String("out", "", "write the key to `file` (gen-key)")
	oldFile := fs.String("secret-key-file", "", "the current key `file` (rotate-key)")
	newFile := fs.String("new-secret-key-file", "", "the new key `file` (rotate-key)")
	if err := fs.Parse(rest); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() != 0 {
		fmt.Fprintf(stderr, "companion secrets %s: unexpected argument %q (see --help)\n", sub, fs.Arg(0))
		return 2
	}
	var err error
	switch sub {
	case "gen-key":
		err = genKey(*out, stdout, stderr)
	case "rotate-key":
		err = rotateKey(context.Background(), *dataDir, *oldFile, *newFile, stdout)
	default:
		fmt.Fprintf(stderr, "companion secrets: unknown subcommand %q\n\n%s", sub, secretsUsage)
		return 2
	}
	return subcommandResult("secrets", sub, err, stderr)
}

// genKey writes a new key to out (created 0600, never overwritten) or to
// stdout. When stdout is a file, it is made 0600 first, so that
// `gen-key > FILE` gives a file companion accepts.
func genKey(out string, stdout, stderr io.Writer) error {
	key := secrets.GenerateKey()
	if out != "" {
		f, err := os.OpenFile(out, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return fmt.Errorf("%w (a key file is never overwritten: a lost key loses every token sealed with it)", err)
		}
		if _, err := f.Write(key); err != nil {
			f.Close()
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "Wrote a new secret key to %s (mode 0600). Keep a copy somewhere safe.\n", out)
		return nil
	}
	if f, ok := stdout.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode().IsRegular() && st.Mode().Perm()&0o077 != 0 {
			if err := f.Chmod(0o600); err != nil {
				return fmt.Errorf("stdout is a file others can read, and making it mode 0600 failed (%v); use --out FILE", err)
			}
		}
	}
	_, err := stdout.Write(key)
	return err
}

// rotateKey re-seals the data dir's secrets with a new key. It holds the
// data dir's lock: a running companion would go on sealing with the old
// key.
func rotateKey(ctx context.Context, dataDir, oldFile, newFile string, stdout io.Writer) error {
	if newFile == "" {
		return errors.New("--new-secret-key-file is required (make one with `companion secrets gen-key --out FILE`)")
	}
	oldKey, source, err := secrets.FindKey(oldFile)
	if err != nil {
		return fmt.Errorf("old key: %w", err)
	}
	if oldKey == nil {
		return errors.New("--secret-key-file (the current key) is required")
	}
	newKey, err := secrets.LoadKeyFile(newFile)
	if err != nil {
		return fmt.Errorf("new key: %w", err)
	}
	path := sqlitePath(dataDir)
	if _, err := os.Stat(path); err != nil {
		return fmt.Errorf("no companion database at %s: %w", path, err)
	}
	unlock, err := lockDataDir(ctx, dataDir, offlineLockWait, nil)
	if err != nil {
		return fmt.Errorf("%w; stop companion before rotating its key, then start it with the new key", err)
	}
	defer unlock()
	store, err := db.Open(ctx, path)
	if err != nil {
		return err
	}
	defer store.Close()
	instance, err := store.InstanceID(ctx)
	if err != nil {
		return err
	}
	n, err := secrets.Rotate(ctx, store, instance, oldKey, newKey)
	if err != nil {
		return fmt.Errorf("%w (key from %s)", err, source)
	}
	fmt.Fprintf(stdout, "Re-encrypted %d sealed secrets with key id %s. Start companion with --secret-key-file %s; the old key (id %s) no longer opens them.\n",
		n, newKey.ID(), newFile, oldKey.ID())
	return nil
}
