package core

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/hex"
	"strings"
)

var idEncoding = base32.StdEncoding.WithPadding(base32.NoPadding)

// NewID returns prefix_ followed by 16 random base32 characters (80 bits).
func NewID(prefix string) string {
	var b [10]byte
	rand.Read(b[:])
	return prefix + "_" + strings.ToLower(idEncoding.EncodeToString(b[:]))
}

// newToken returns a random 256-bit token, url-safe.
func newToken() string {
	var b [32]byte
	rand.Read(b[:])
	return strings.ToLower(idEncoding.EncodeToString(b[:]))
}

// HashToken is how tokens are stored: SHA-256, hex.
func HashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}
