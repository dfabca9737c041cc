package secrets

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// CredentialName is the systemd credential companion reads its secret key
// from ($CREDENTIALS_DIRECTORY/companion-secret-key, e.g. with
// LoadCredential=companion-secret-key:/etc/companion/secret-key).
const CredentialName = "companion-secret-key"

// maxKeyFile bounds what is read of a key file: a key in any accepted
// encoding is well under it.
const maxKeyFile = 4096

// GenerateKey returns a new key's 32 random bytes, base64-encoded with a
// newline: the form `companion secrets gen-key` writes.
func GenerateKey() []byte {
	raw := make([]byte, KeySize)
	rand.Read(raw) // never fails (crypto/rand)
	return []byte(base64.StdEncoding.EncodeToString(raw) + "\n")
}

// ParseKey reads a key in any of its file forms: exactly 32 raw bytes, or
// (surrounding white space ignored) 64 hex digits, or 32 bytes in base64
// (standard or URL alphabet, padded or not). Errors never quote the
// content.
func ParseKey(b []byte) (*Key, error) {
	if len(b) == KeySize {
		return NewKey(b)
	}
	t := bytes.TrimSpace(b)
	if len(t) == 2*KeySize {
		if raw, err := hex.DecodeString(string(t)); err == nil {
			return NewKey(raw)
		}
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if raw, err := enc.DecodeString(string(t)); err == nil && len(raw) == KeySize {
			return NewKey(raw)
		}
	}
	return nil, fmt.Errorf("it holds %d bytes that are not a key: want 32 random bytes, raw, as 64 hex digits or in base64 (44 characters); make one with `companion secrets gen-key --out FILE`", len(b))
}

// LoadKeyFile reads the key in path. The file must be a regular file
// owned by the user companion runs as and readable by nobody else (mode
// 0600 or 0400): a key others can read protects nothing.
func LoadKeyFile(path string) (*Key, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("secret key file: %w", err)
	}
	defer f.Close()
	st, err := f.Stat() // of the file opened, not of whatever the path names later
	if err != nil {
		return nil, fmt.Errorf("secret key file: %w", err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("secret key file %s is not a regular file", path)
	}
	if perm := st.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("secret key file %s has mode %04o, so users other than its owner can read it; refusing it: run `chmod 600 %s`", path, perm, path)
	}
	if err := checkOwner(path, st); err != nil {
		return nil, err
	}
	return readKey(path, f)
}

// loadCredential reads the key systemd passed as a credential. Its mode
// and owner are not checked: systemd makes the directory readable only by
// the unit's user and may give access by an ACL on a root-owned file.
func loadCredential(path string) (*Key, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("systemd credential %s: %w", CredentialName, err)
	}
	defer f.Close()
	return readKey(path, f)
}

func readKey(path string, r io.Reader) (*Key, error) {
	b, err := io.ReadAll(io.LimitReader(r, maxKeyFile+1))
	if err != nil {
		return nil, fmt.Errorf("read secret key %s: %w", path, err)
	}
	if len(b) > maxKeyFile {
		return nil, fmt.Errorf("secret key %s is larger than %d bytes, so it is not a key; make one with `companion secrets gen-key --out FILE`", path, maxKeyFile)
	}
	k, err := ParseKey(b)
	if err != nil {
		return nil, fmt.Errorf("secret key %s: %w", path, err)
	}
	return k, nil
}

// FindKey returns the configured secret key and where it came from: the
// file named by keyFile when it is not empty, else the systemd credential
// when $CREDENTIALS_DIRECTORY holds one. With neither it returns nil and
// no error.
func FindKey(keyFile string) (*Key, string, error) {
	if keyFile != "" {
		k, err := LoadKeyFile(keyFile)
		return k, keyFile, err
	}
	dir := os.Getenv("CREDENTIALS_DIRECTORY")
	if dir == "" {
		return nil, "", nil
	}
	path := filepath.Join(dir, CredentialName)
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return nil, "", nil
	}
	k, err := loadCredential(path)
	return k, "systemd credential " + CredentialName, err
}
