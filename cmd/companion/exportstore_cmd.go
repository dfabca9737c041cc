package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/exportstore"
)

const exportStoreUsage = `Usage:
  companion export-store set-keys URL [--data-dir DIR | --database-file FILE]
                     [--secrets keyring|sealed] [--secret-key-file FILE]
        keep the keys of the bucket URL names in companion's secret store,
        read from stdin, never from the command line. For s3://, NAME=VALUE
        lines:
            AWS_ACCESS_KEY_ID=AKIA…
            AWS_SECRET_ACCESS_KEY=…
            AWS_SESSION_TOKEN=…        (optional)
        for gs://, a service account key file:
            companion export-store set-keys gs://bucket/exports < key.json
        The bucket is tried with them first; keys it refuses are not kept.
        companion then uses them for --export-store URLs of that bucket
        instead of the platform's credential chain.
  companion export-store show URL [--data-dir DIR | --database-file FILE]
        say whether keys are kept for the bucket, and which (the access key
        id or the service account; never a secret)
  companion export-store forget URL [--data-dir DIR | --database-file FILE]
        delete the bucket's kept keys: companion goes back to the platform's
        credential chain (AWS environment, shared config or instance role;
        Google application default credentials)

They work on the data dir directly and need companion stopped (it reads the
keys when it starts); with --database or --database-file, on that database
while the replicas run, with the sealed store (--secrets sealed) so that
every replica can read the keys. Restart the replicas to use new keys.
`

func runExportStore(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	sub, rest, fs, code, ok := subcommand("export-store", exportStoreUsage, args, stdout, stderr)
	if !ok {
		return code
	}
	dataDir := fs.String("data-dir", defaultDataDir(), "companion's data `directory`")
	dbf := addStoreFlags(fs)
	var sf secretFlags
	sf.addFlags(fs)
	pos, code, ok := parseFlags(fs, rest)
	if !ok {
		return code
	}
	if err := sf.check(); err != nil {
		fmt.Fprintf(stderr, "companion export-store %s: %v\n", sub, err)
		return 2
	}
	dbURL, err := dbf.resolve()
	if err == nil && len(pos) != 1 {
		err = fmt.Errorf("give the store's URL, e.g. s3://bucket/prefix?region=eu-west-1 (the bucket's keys are kept, whatever the prefix)")
	}
	if err != nil {
		fmt.Fprintf(stderr, "companion export-store %s: %v\n", sub, err)
		return 2
	}
	ctx := context.Background()
	where := storeAt{dataDir: *dataDir, url: dbURL}
	switch sub {
	case "set-keys":
		err = setStoreKeys(ctx, where, sf, pos[0], stdin, stdout, stderr)
	case "show", "forget":
		err = storeKeys(ctx, where, sf, pos[0], sub == "forget", stdout, stderr)
	default:
		fmt.Fprintf(stderr, "companion export-store: unknown subcommand %q\n\n%s", sub, exportStoreUsage)
		return 2
	}
	return subcommandResult("export-store", sub, err, stderr)
}

// storeKeysBusy is the advice when a running companion holds the lock.
const storeKeysBusy = "stop companion first: it reads the store's keys when it starts"

func setStoreKeys(ctx context.Context, where storeAt, sf secretFlags, rawURL string, stdin io.Reader, stdout, stderr io.Writer) error {
	key, err := exportstore.CredentialsKey(rawURL)
	if err != nil {
		return err
	}
	in, err := io.ReadAll(io.LimitReader(stdin, maxCredentialInput+1))
	if err != nil {
		return fmt.Errorf("read the keys from stdin: %w", err)
	}
	if len(in) > maxCredentialInput {
		return fmt.Errorf("stdin holds more than %d bytes; it should hold the keys only", maxCredentialInput)
	}
	creds, err := exportstore.ParseCredentials(rawURL, in)
	if err != nil {
		return err
	}
	o, keys, _, err := openOfflineSecrets(ctx, where, sf, storeKeysBusy, stderr)
	if err != nil {
		return err
	}
	defer o.Close()
	st, err := exportstore.Open(ctx, rawURL, creds.Options(exportstore.Options{}))
	if err != nil {
		return fmt.Errorf("the bucket refused these keys, so they were not kept: %w", err)
	}
	st.Close()
	b, err := json.Marshal(creds)
	if err != nil {
		return err
	}
	if err := keys.Set(ctx, key, string(b)); err != nil {
		return fmt.Errorf("keep the keys: %w", err)
	}
	fmt.Fprintf(stdout, "kept %s for %s; companion uses them from its next start\n", creds.Describe(), exportstore.KeyBucket(key))
	return nil
}

func storeKeys(ctx context.Context, where storeAt, sf secretFlags, rawURL string, forget bool, stdout, stderr io.Writer) error {
	key, err := exportstore.CredentialsKey(rawURL)
	if err != nil {
		return err
	}
	o, keys, _, err := openOfflineSecrets(ctx, where, sf, storeKeysBusy, stderr)
	if err != nil {
		return err
	}
	defer o.Close()
	bucket := exportstore.KeyBucket(key)
	creds, ok, err := keptStoreKeys(ctx, keys, rawURL)
	switch {
	case err != nil:
		return err
	case !ok:
		fmt.Fprintf(stdout, "no keys are kept for %s: companion uses the platform's credential chain\n", bucket)
		return nil
	case !forget:
		fmt.Fprintf(stdout, "%s is kept for %s\n", creds.Describe(), bucket)
		return nil
	}
	if err := keys.Delete(ctx, key); err != nil {
		return fmt.Errorf("delete the keys: %w", err)
	}
	fmt.Fprintf(stdout, "forgot %s for %s; companion uses the platform's credential chain from its next start\n", creds.Describe(), bucket)
	return nil
}

// keptStoreKeys reads the keys kept for the bucket of a store URL; ok is
// false when none are (or the store takes none: file://).
func keptStoreKeys(ctx context.Context, keys core.Secrets, rawURL string) (exportstore.Credentials, bool, error) {
	key, err := exportstore.CredentialsKey(rawURL)
	if err != nil || keys == nil {
		return exportstore.Credentials{}, false, nil
	}
	v, err := keys.Get(ctx, key)
	if core.IsKind(err, core.KindNotFound) {
		return exportstore.Credentials{}, false, nil
	}
	if err != nil {
		return exportstore.Credentials{}, false, fmt.Errorf("read the export store's keys from the secret store: %w", err)
	}
	var c exportstore.Credentials
	if err := json.Unmarshal([]byte(v), &c); err != nil {
		return exportstore.Credentials{}, false, errors.New("the export store's keys in the secret store do not decode; keep them again with `companion export-store set-keys`")
	}
	return c, true, nil
}

// storeOptions are the options the export store opens with: the kept
// keys, if any, else the platform's chains.
func storeOptions(ctx context.Context, keys core.Secrets, rawURL string, log *slog.Logger) (exportstore.Options, error) {
	creds, ok, err := keptStoreKeys(ctx, keys, rawURL)
	if err != nil || !ok {
		return exportstore.Options{}, err
	}
	log.Info("the export store's keys come from the secret store", "keys", creds.Describe())
	return creds.Options(exportstore.Options{}), nil
}
