package webhooks

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Headers of a delivery.
const (
	// HeaderSignature carries "t=<unix seconds>,v1=<hex HMAC-SHA256 of
	// "<t>.<body>" under the webhook's secret>", and after a rotation, for
	// its grace period, a second v1 under the previous secret.
	HeaderSignature = "Companion-Signature"
	// HeaderEvent is the event's type, HeaderEventID its id.
	HeaderEvent   = "Companion-Event"
	HeaderEventID = "Companion-Event-Id"
	// HeaderIdempotency is the delivery's id: the same at every attempt of
	// one event to one webhook, so a receiver drops what it already has.
	HeaderIdempotency = "Idempotency-Key"
)

// DefaultTolerance is how old a signature's timestamp a receiver should
// accept: older is a replay.
const DefaultTolerance = 5 * time.Minute

// newSecret returns a new signing secret.
func newSecret() string {
	var b [32]byte
	rand.Read(b[:])
	return "whsec_" + base64.RawURLEncoding.EncodeToString(b[:])
}

func mac(secret string, t int64, body []byte) []byte {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(strconv.FormatInt(t, 10)))
	m.Write([]byte{'.'})
	m.Write(body)
	return m.Sum(nil)
}

// Sign returns the HeaderSignature value of body sent at t.
func Sign(secret string, t time.Time, body []byte) string {
	return SignAll([]string{secret}, t, body)
}

// SignAll returns the HeaderSignature value of body sent at t with one
// v1 entry per secret, in the order given: during a rotation's grace
// period the new secret's, then the old one's.
func SignAll(secrets []string, t time.Time, body []byte) string {
	ts := t.Unix()
	var b strings.Builder
	fmt.Fprintf(&b, "t=%d", ts)
	for _, s := range secrets {
		b.WriteString(",v1=")
		b.WriteString(hex.EncodeToString(mac(s, ts, body)))
	}
	return b.String()
}

// Errors of Verify.
var (
	ErrNoSignature  = errors.New("webhooks: no valid signature header")
	ErrBadSignature = errors.New("webhooks: the signature does not match the body")
	ErrTooOld       = errors.New("webhooks: the signature's timestamp is outside the tolerance (a replay?)")
)

// Verify checks a HeaderSignature value against body as a receiver does:
// the HMAC must match (compared in constant time) and the timestamp be
// within tolerance of now, either way. Several v1 entries are allowed (any
// one matching will do), for a receiver that rotates secrets.
func Verify(secret, header string, body []byte, now time.Time, tolerance time.Duration) error {
	var (
		ts   int64
		sigs [][]byte
	)
	for _, part := range strings.Split(header, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			continue
		}
		switch k {
		case "t":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return ErrNoSignature
			}
			ts = n
		case "v1":
			if b, err := hex.DecodeString(v); err == nil {
				sigs = append(sigs, b)
			}
		}
	}
	if ts == 0 || len(sigs) == 0 {
		return ErrNoSignature
	}
	want := mac(secret, ts, body)
	ok := false
	for _, s := range sigs {
		if hmac.Equal(s, want) {
			ok = true
		}
	}
	if !ok {
		return ErrBadSignature
	}
	if d := now.Sub(time.Unix(ts, 0)); d > tolerance || d < -tolerance {
		return ErrTooOld
	}
	return nil
}
