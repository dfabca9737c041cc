package hostcall

import (
	"encoding/base32"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/url"
	"strings"
	"testing"
)

// Secrets with and without the characters that escapes and base64 treat
// specially.
const (
	plainSecret  = "tok-API-0123456789abcdef"
	oddSecret    = "s3/cr+t=%x&y\"z\\w~Q_9"
	shortSecret  = "abc12" // below minRedact: never scrubbed
	unrelatedTxt = `{"id":"box-1","name":"my box","note":"tok-API-0123 is only a prefix","hex":"746f6b2d"}`
)

// jsonEscapeAll writes every byte as \u00XX in the given case.
func jsonEscapeAll(s string, upper bool) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if upper {
			fmt.Fprintf(&b, `\u%04X`, s[i])
		} else {
			fmt.Fprintf(&b, `\u%04x`, s[i])
		}
	}
	return b.String()
}

// mixEscapes alternates raw characters with several escape styles.
func mixEscapes(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch i % 5 {
		case 0:
			fmt.Fprintf(&b, `\u%04x`, s[i])
		case 1:
			b.WriteByte(s[i])
		case 2:
			fmt.Fprintf(&b, "%%%02X", s[i])
		case 3:
			fmt.Fprintf(&b, "&#%d;", s[i])
		default:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		}
	}
	return b.String()
}

func percentAll(s string, upper bool) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if upper {
			fmt.Fprintf(&b, "%%%02X", s[i])
		} else {
			fmt.Fprintf(&b, "%%%02x", s[i])
		}
	}
	return b.String()
}

func htmlHexAll(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		fmt.Fprintf(&b, "&#x%X;", s[i])
	}
	return b.String()
}

// encodings are the forms a provider might echo a secret in, each with a
// decoder that recovers the secret if the redaction missed it.
func encodings() []struct {
	name string
	enc  func(string) string
} {
	b64 := func(enc *base64.Encoding, prefix string) func(string) string {
		return func(s string) string { return enc.EncodeToString([]byte(prefix + s + " trailing")) }
	}
	return []struct {
		name string
		enc  func(string) string
	}{
		{"raw", func(s string) string { return s }},
		{"json \\u lower", func(s string) string { return jsonEscapeAll(s, false) }},
		{"json \\u upper", func(s string) string { return jsonEscapeAll(s, true) }},
		{"mixed escapes", mixEscapes},
		{"percent lower", func(s string) string { return percentAll(s, false) }},
		{"percent upper", func(s string) string { return percentAll(s, true) }},
		{"query escape", url.QueryEscape},
		{"path escape", url.PathEscape},
		{"html hex refs", htmlHexAll},
		{"hex lower", func(s string) string { return hex.EncodeToString([]byte(s)) }},
		{"hex upper", func(s string) string { return strings.ToUpper(hex.EncodeToString([]byte(s))) }},
		{"hex mixed case", func(s string) string {
			h := []byte(hex.EncodeToString([]byte(s)))
			for i := range h {
				if i%2 == 0 {
					h[i] = byte(strings.ToUpper(string(h[i]))[0])
				}
			}
			return string(h)
		}},
		{"base64 std", b64(base64.StdEncoding, "")},
		{"base64 std +1", b64(base64.StdEncoding, "B")},
		{"base64 std bearer", b64(base64.StdEncoding, "Bearer ")},
		{"base64 url +2", b64(base64.URLEncoding, "ab")},
		{"base64 raw url", b64(base64.RawURLEncoding, "x")},
		{"base64 std json-escaped", func(s string) string {
			return strings.ReplaceAll(base64.StdEncoding.EncodeToString([]byte("u:"+s)), "/", `\/`)
		}},
		{"base32", func(s string) string { return base32.StdEncoding.EncodeToString([]byte("ab" + s)) }},
		{"base32 lower +3", func(s string) string { return strings.ToLower(base32.StdEncoding.EncodeToString([]byte("abc" + s))) }},
		{"base32 +1 +4", func(s string) string { return base32.StdEncoding.EncodeToString([]byte("a" + s + "wxyz")) }},
		{"base64 std percent-encoded", func(s string) string {
			return url.QueryEscape(base64.StdEncoding.EncodeToString([]byte(s)))
		}},
	}
}

func TestScrubberFindsEveryEncoding(t *testing.T) {
	for _, secret := range []string{plainSecret, oddSecret} {
		sc := newScrubber([]string{secret})
		for _, e := range encodings() {
			enc := e.enc(secret)
			text := `{"before":"x","v":"` + enc + `","after":"y"}`
			out := string(sc.redact([]byte(text)))
			if !strings.Contains(out, Redacted) {
				t.Errorf("%s of %q: not redacted: %s", e.name, secret, out)
				continue
			}
			if strings.Contains(out, enc) || strings.Contains(out, secret) {
				t.Errorf("%s of %q: still present: %s", e.name, secret, out)
			}
			if !strings.HasPrefix(out, `{"before":"x","v":"`) || !strings.HasSuffix(out, `","after":"y"}`) {
				t.Errorf("%s: text around the secret changed: %s", e.name, out)
			}
			if !sc.contains(enc) {
				t.Errorf("%s: contains() misses it", e.name)
			}
		}
	}
}

func TestScrubberLeavesOtherTextAlone(t *testing.T) {
	sc := newScrubber([]string{plainSecret, shortSecret})
	for _, s := range []string{unrelatedTxt, "abc12 abc12", "", "%", `\u00`, "&#;", "&#x;", "+++", strings.Repeat(`\`, 50)} {
		if got := string(sc.redact([]byte(s))); got != s {
			t.Errorf("%q became %q", s, got)
		}
	}
	if newScrubber(nil).contains(plainSecret) {
		t.Fatal("an empty scrubber matched")
	}
}

func TestScrubberRedactsEveryOccurrence(t *testing.T) {
	sc := newScrubber([]string{plainSecret})
	text := plainSecret + " and " + jsonEscapeAll(plainSecret, false) + " and " + hex.EncodeToString([]byte(plainSecret))
	out := string(sc.redact([]byte(text)))
	if want := Redacted + " and " + Redacted + " and " + Redacted; out != want {
		t.Fatalf("got %q, want %q", out, want)
	}
}

// BenchmarkScrub measures the redaction of a 64 KiB response with no
// secret in it, the common case.
func BenchmarkScrub(b *testing.B) {
	sc := newScrubber([]string{plainSecret, oddSecret})
	body := []byte(strings.Repeat(unrelatedTxt, 64<<10/len(unrelatedTxt)))
	b.SetBytes(int64(len(body)))
	for i := 0; i < b.N; i++ {
		sc.redact(body)
	}
}
