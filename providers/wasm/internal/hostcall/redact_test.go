package hostcall_test

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/providers/wasm/internal/hostcall"
)

// echoForms are the ways a hostile or careless provider might send back the
// credential it received; decode recovers the secret from what the module
// got, so a miss shows up as the token itself.
var echoForms = []struct {
	name   string
	encode func(string) string
	decode func(string) string
}{
	{"raw", same, same},
	{"json-unicode", func(s string) string {
		var b strings.Builder
		for i := 0; i < len(s); i++ {
			fmt.Fprintf(&b, `\u%04x`, s[i])
		}
		return b.String()
	}, same}, // the module's JSON decoder undoes it: the test decodes the body as JSON
	{"json-unicode-upper", func(s string) string {
		var b strings.Builder
		for i := 0; i < len(s); i++ {
			fmt.Fprintf(&b, `\u%04X`, s[i])
		}
		return b.String()
	}, same},
	{"percent", func(s string) string {
		var b strings.Builder
		for i := 0; i < len(s); i++ {
			fmt.Fprintf(&b, "%%%02X", s[i])
		}
		return b.String()
	}, func(s string) string { v, _ := url.QueryUnescape(s); return v }},
	{"base64-std", func(s string) string { return base64.StdEncoding.EncodeToString([]byte("Bearer " + s)) },
		func(s string) string { v, _ := base64.StdEncoding.DecodeString(s); return string(v) }},
	{"base64-url", func(s string) string { return base64.URLEncoding.EncodeToString([]byte("k=" + s)) },
		func(s string) string { v, _ := base64.URLEncoding.DecodeString(s); return string(v) }},
	{"hex", func(s string) string { return hex.EncodeToString([]byte(s)) },
		func(s string) string { v, _ := hex.DecodeString(s); return string(v) }},
	{"HEX", func(s string) string { return strings.ToUpper(hex.EncodeToString([]byte(s))) },
		func(s string) string { v, _ := hex.DecodeString(s); return string(v) }},
}

func same(s string) string { return s }

// TestRedactsEchoedCredentialInEveryEncoding: an upstream echoes the
// injected token in each encoding, in the body (JSON) and in a header.
// After the module's own decoding nothing of it is left.
func TestRedactsEchoedCredentialInEveryEncoding(t *testing.T) {
	api := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		tok := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		form := echoForms[0]
		for _, f := range echoForms {
			if f.name == r.URL.Query().Get("form") {
				form = f
			}
		}
		w.Header().Set("X-Echo", form.encode(tok))
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"name":"box-%s","id":"%s"}`, form.encode(tok), form.encode(tok))
	})
	p := policy(t, nil, keyring(t, map[string]string{"token": apiToken}))
	for _, f := range echoForms {
		t.Run(f.name, func(t *testing.T) {
			c := p.NewCall(acct(map[string]string{"api_url": api.URL}))
			r := do(t, c, map[string]any{"upstream": "api", "path": "/", "query": map[string]any{"form": f.name}})
			if r.Error != nil || r.Body == nil {
				t.Fatalf("%+v", r)
			}
			var got struct{ Name, ID string }
			if err := json.Unmarshal([]byte(*r.Body), &got); err != nil {
				t.Fatalf("the redacted body is no longer JSON: %v: %s", err, *r.Body)
			}
			for what, v := range map[string]string{"name": got.Name, "id": got.ID, "header": r.Headers["X-Echo"]} {
				if strings.Contains(f.decode(v), apiToken) || strings.Contains(v, apiToken) {
					t.Errorf("%s: the token reached the module: %q", what, v)
				}
				if !strings.Contains(v, hostcall.Redacted) {
					t.Errorf("%s: %q has no %s marker", what, v, hostcall.Redacted)
				}
			}
			if red := c.Redact(f.encode(apiToken)); !c.Leaks(f.encode(apiToken)) || c.Leaks(red) || !strings.Contains(red, hostcall.Redacted) {
				t.Errorf("Leaks/Redact miss the %s form", f.name)
			}
		})
	}
}

// TestBinaryBodyIsRedacted: a body that is not UTF-8 goes to the module
// as base64; the token inside is scrubbed before that.
func TestBinaryBodyIsRedacted(t *testing.T) {
	api := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		w.Write(append([]byte{0xff, 0xfe, 0}, r.Header.Get("Authorization")...))
	})
	p := policy(t, nil, keyring(t, map[string]string{"token": apiToken}))
	r := do(t, p.NewCall(acct(map[string]string{"api_url": api.URL})), map[string]any{"upstream": "api", "path": "/"})
	if r.Error != nil || r.BodyBase64 == nil {
		t.Fatalf("%+v", r)
	}
	if strings.Contains(string(r.BodyBase64), apiToken) || !strings.Contains(string(r.BodyBase64), hostcall.Redacted) {
		t.Fatalf("binary body %q", r.BodyBase64)
	}
}

// TestCompressedBodiesStayReadable: the module may not ask for a
// compressed body (the host could not read it), and a body the upstream
// compressed unasked in a coding the host does not decode is refused.
func TestCompressedBodiesStayReadable(t *testing.T) {
	api := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Encoding", "br")
		w.Write([]byte("opaque"))
	})
	p := policy(t, nil, keyring(t, map[string]string{"token": apiToken}))
	c := p.NewCall(acct(map[string]string{"api_url": api.URL}))
	wantErr(t, do(t, c, map[string]any{"upstream": "api", "path": "/", "headers": map[string]string{"Accept-Encoding": "gzip"}}), "invalid", "set by the host")
	if api.n.Load() != 0 {
		t.Fatal("a request asking for a compressed body went out")
	}
	wantErr(t, do(t, c, map[string]any{"upstream": "api", "path": "/"}), "unavailable", `"br"-encoded body`)
}

// TestPlainHTTPOverrideOnlyTowardLoopback: the host refuses, at request
// time, an account whose override sends the credential over plain http to
// a host that is not loopback, before anything is sent.
func TestPlainHTTPOverrideOnlyTowardLoopback(t *testing.T) {
	p := policy(t, nil, nil) // refused before any credential is read
	for _, u := range []string{"http://api.acme.example", "http://10.0.0.5:8080", "http://169.254.169.254", "http://127.0.0.1.nip.io"} {
		c := p.NewCall(acct(map[string]string{"api_url": u}))
		r := do(t, c, map[string]any{"upstream": "api", "path": "/"})
		wantErr(t, r, "invalid", "api_url uses plain http://")
		if !strings.Contains(r.Error.Message, "use https://") {
			t.Fatalf("%s: %q does not say what to do", u, r.Error.Message)
		}
	}
}

// TestOutputCheckedAgainstEarlierCalls: instances are shared by accounts,
// so a module could keep what one call received and return it in another
// call, for another account, that made no request. That later call's
// checks still know the credential.
func TestOutputCheckedAgainstEarlierCalls(t *testing.T) {
	api := newRecorder(t, nil)
	p := policy(t, nil, keyring(t, map[string]string{"token": apiToken}))
	if c := p.NewCall(acct(nil)); c.Leaks(apiToken) {
		t.Fatal("a module that never had a credential cannot leak one")
	}
	do(t, p.NewCall(acct(map[string]string{"api_url": api.URL})), map[string]any{"upstream": "api", "path": "/"})
	other := p.NewCall(&core.Account{ID: "acc-2"})
	stashed := "n-" + hex.EncodeToString([]byte(apiToken))
	if !other.Leaks(stashed) || other.Redact(stashed) != "n-"+hostcall.Redacted {
		t.Fatalf("a credential of an earlier call was not recognised: %q", other.Redact(stashed))
	}
}
