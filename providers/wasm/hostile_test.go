package wasm

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/canvasapp/companion/core"
)

func mustManifest(t testing.TB, bin []byte) []byte {
	t.Helper()
	m, err := ManifestJSON(bin)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

const (
	hostileToken = "tok-HOSTILE-fedcba9876543210"
	hostileKey   = "key-HOSTILE-0123456789"
)

// hostileAPI is the upstream the hostile module's "api" is pointed at.
type hostileAPI struct {
	srv       *httptest.Server
	elsewhere *httptest.Server // an undeclared host
	requests  atomic.Int64
	strays    atomic.Int64 // requests that reached the undeclared host
}

func newHostileAPI(t testing.TB) *hostileAPI {
	h := &hostileAPI{}
	h.elsewhere = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.strays.Add(1)
		fmt.Fprint(w, "secret from an undeclared host")
	}))
	t.Cleanup(h.elsewhere.Close)
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.requests.Add(1)
		switch r.URL.Path {
		case "/ok":
			fmt.Fprint(w, "{}")
		case "/redirect":
			http.Redirect(w, r, h.elsewhere.URL+"/steal", http.StatusFound)
		case "/bomb":
			chunk := make([]byte, 1<<20)
			for i := 0; i < 64; i++ {
				if _, err := w.Write(chunk); err != nil {
					return
				}
			}
		case "/echo":
			for k, vs := range r.Header {
				fmt.Fprintf(w, "%s=%s\n", k, strings.Join(vs, ","))
			}
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(h.srv.Close)
	return h
}

func hostileAcct(api *hostileAPI, behavior string) core.Account {
	return core.Account{ID: "acc-h", Provider: "hostile", Config: map[string]string{"api_url": api.srv.URL, "behavior": behavior}}
}

// servesStill asserts that the host, the well-behaved module and (when
// given) the hostile module itself keep answering.
func servesStill(t *testing.T, good, hm *Adapter, api *hostileAPI) {
	t.Helper()
	boxes, err := good.List(context.Background(), core.Account{ID: "g", Config: map[string]string{"mode": "static"}})
	if err != nil || len(boxes) != 3 {
		t.Fatalf("well-behaved module stopped serving: %v", err)
	}
	if hm != nil {
		if _, err := hm.List(context.Background(), hostileAcct(api, "fine")); err != nil {
			t.Fatalf("hostile module cannot serve a fine call afterwards: %v", err)
		}
	}
}

func TestHostileGoModule(t *testing.T) {
	e := newEnv(t)
	good := e.load(t, goodWasm)
	hm := e.load(t, hostile)
	api := newHostileAPI(t)

	// Cases marked creds send a request toward the api upstream, which
	// carries the account's credentials (from the real keyring).
	const creds = true
	cases := []struct {
		behavior string
		kind     core.ErrorKind
		contains []string
		discard  bool
		check    func(t *testing.T)
		creds    bool
	}{
		{"loop", core.KindUnavailable, []string{"did not finish list within 1.5s"}, true, nil, false},
		{"memory", core.KindInternal, []string{"ran out of memory", "32 MiB"}, true, nil, false},
		{"recursion", core.KindInternal, []string{"hostile"}, true, nil, false},
		{"block", core.KindUnavailable, []string{"did not finish"}, true, nil, false},
		{"deadlock", core.KindInternal, []string{"blocked forever"}, true, nil, false},
		{"exit", core.KindInternal, []string{"exited (code 3)"}, true, nil, false},
		{"undeclared", core.KindInternal, []string{"sandbox rule", `upstream "evil"`}, true, nil, false},
		{"ignore_violation", core.KindInternal, []string{"sandbox rule", `upstream "evil"`}, true, nil, false},
		{"redirect", core.KindInternal, []string{"redirected to " + api.elsewhere.URL, "not a host this module may reach"}, true, func(t *testing.T) {
			if n := api.strays.Load(); n != 0 {
				t.Fatalf("the undeclared host received %d requests", n)
			}
		}, creds},
		{"private", core.KindInternal, []string{"resolves to", "loopback"}, true, func(t *testing.T) {
			if n := privateConns.Load(); n != 0 {
				t.Fatalf("the private address received %d connections", n)
			}
		}, false},
		{"response_bomb", core.KindInternal, []string{"more than 65536 bytes", "limits.response_bytes"}, true, nil, creds},
		{"flood", core.KindInternal, []string{"more than 5 requests", "limits.requests_per_call"}, true, nil, creds},
		{"authorization", core.KindInternal, []string{"Authorization header"}, true, nil, false},
		{"credential_header", core.KindInternal, []string{"X-Api-Key header"}, true, nil, false},
		// No filesystem and no environment: the reads fail inside the
		// guest; no host rule is broken, so the instance stays.
		{"file", core.KindUnavailable, []string{"no files"}, false, nil, false},
	}
	for _, c := range cases {
		t.Run(c.behavior, func(t *testing.T) {
			if c.creds {
				e.setCred(t, "acc-h", "token", hostileToken)
				e.setCred(t, "acc-h", "api_key", hostileKey)
			}
			before := hm.Stats()
			reqs := api.requests.Load()
			_, err := hm.List(context.Background(), hostileAcct(api, c.behavior))
			mustKind(t, err, c.kind, c.contains...)
			// Metrics tell the budgets from other faults.
			if want, ok := map[string]string{"loop": "time_budget", "block": "time_budget", "memory": "memory_budget", "exit": "fault", "deadlock": "fault"}[c.behavior]; ok {
				if got := CallOutcome(err); got != want {
					t.Errorf("CallOutcome = %q, want %q", got, want)
				}
			}
			after := hm.Stats()
			if c.discard && (after.Discarded != before.Discarded+1 || after.Idle != 0) {
				t.Fatalf("bad instance not discarded: before %+v after %+v", before, after)
			}
			if !c.discard && after.Discarded != before.Discarded {
				t.Fatalf("instance discarded: %+v", after)
			}
			switch c.behavior {
			case "flood":
				if n := api.requests.Load() - reqs; n != 5 {
					t.Fatalf("%d requests reached the upstream; the limit is 5", n)
				}
			case "authorization", "credential_header", "undeclared":
				if n := api.requests.Load() - reqs; n != 0 {
					t.Fatalf("%d requests reached the upstream", n)
				}
			}
			if c.check != nil {
				c.check(t)
			}
			servesStill(t, good, hm, api)
		})
	}
}

func TestHostileRawModules(t *testing.T) {
	e := newEnv(t)
	good := e.load(t, goodWasm)
	api := newHostileAPI(t)
	acct := core.Account{ID: "acc-w", Config: map[string]string{"api_url": api.srv.URL}}

	cases := []struct {
		module   string
		kind     core.ErrorKind
		contains []string
		creds    bool // the module makes a real request first
	}{
		{"oob_pointer", core.KindInternal, []string{"sandbox rule", "outside the module's", "memory"}, false},
		{"absurd_length", core.KindInternal, []string{"sandbox rule", "request length of 2147483647"}, false},
		{"oob_result_buffer", core.KindInternal, []string{"sandbox rule", "http_result", "outside the module's"}, true},
		{"oob_return", core.KindInternal, []string{"outside the module's memory"}, false},
		{"spin", core.KindUnavailable, []string{"did not finish list within 1s"}, false},
		{"recursion", core.KindInternal, []string{"failed during list", "stack"}, false},
	}
	for _, c := range cases {
		t.Run(c.module, func(t *testing.T) {
			if c.creds {
				e.setCred(t, "acc-w", "token", hostileToken)
			}
			m := e.load(t, watModule(t, c.module, nil))
			_, err := m.List(context.Background(), acct)
			mustKind(t, err, c.kind, c.contains...)
			if st := m.Stats(); st.Discarded != 1 || st.Idle != 0 {
				t.Fatalf("bad instance kept: %+v", st)
			}
			// The module can still be called (on a fresh instance) and
			// fails the same contained way.
			_, err = m.List(context.Background(), acct)
			mustKind(t, err, c.kind)
			servesStill(t, good, nil, api)
		})
	}
}

// appendCustomSection appends a custom section to a module, unchecked,
// which is how a test embeds a manifest Pack would refuse. Section sizes
// are unsigned LEB128, which is what binary.AppendUvarint writes.
func appendCustomSection(module []byte, name string, payload []byte) []byte {
	body := binary.AppendUvarint(nil, uint64(len(name)))
	body = append(append(body, name...), payload...)
	out := append(bytes.Clone(module), 0)
	out = binary.AppendUvarint(out, uint64(len(body)))
	return append(out, body...)
}

func TestNewerABIRefused(t *testing.T) {
	e := newEnv(t)
	good := e.load(t, goodWasm)

	// Declared in the manifest: refused before anything runs. (Pack
	// refuses such a manifest too, so embed it by hand.)
	var m map[string]any
	if err := json.Unmarshal(mustManifest(t, watModule(t, "newer_abi", nil)), &m); err != nil {
		t.Fatal(err)
	}
	m["abi_version"] = 2
	_, err := Pack(watRaw["newer_abi"], mustJSON(t, m))
	mustKind(t, err, core.KindInvalid, "abi_version", "ABI version 2", "update companion")
	_, err = e.host.LoadEmbedded(appendCustomSection(watRaw["newer_abi"], ManifestSection, mustJSON(t, m)))
	mustKind(t, err, core.KindInvalid, "abi_version", "ABI version 2", "update companion")

	// Reported by the module's export while the manifest claims 1.
	a, err := e.host.LoadEmbedded(watModule(t, "newer_abi", nil))
	if err != nil {
		t.Fatal(err)
	}
	_, err = a.List(context.Background(), core.Account{ID: "x"})
	mustKind(t, err, core.KindInternal, "built for ABI version 2", "update companion")
	// Inspect runs no module code, so only install can learn what the
	// module reports; it refuses the module, naming the field.
	if _, err = e.host.Inspect(context.Background(), watModule(t, "newer_abi", nil)); err != nil {
		t.Fatalf("inspect ran the module: %v", err)
	}
	_, err = e.host.Install(context.Background(), watModule(t, "newer_abi", func(m map[string]any) { m["name"] = "newer-abi-installed" }))
	ce := mustKind(t, err, core.KindInvalid, "was refused", "built for ABI version 2")
	var me *ModuleError
	if !errors.As(ce, &me) || me.Field != "abi_version" || me.Op != "companion_abi_version" {
		t.Fatalf("not a named module error: %#v", ce.Err)
	}

	// No version export at all.
	a, err = e.host.LoadEmbedded(watModule(t, "no_abi", nil))
	if err != nil {
		t.Fatal(err)
	}
	_, err = a.Describe(context.Background())
	mustKind(t, err, core.KindInternal, "does not export companion_abi_version")

	servesStill(t, good, nil, nil)
}

func TestTokenNeverReachesTheModule(t *testing.T) {
	e := newEnv(t)
	e.setCred(t, "acc-h", "token", hostileToken)
	e.setCred(t, "acc-h", "api_key", hostileKey)
	hm := e.load(t, hostile)
	api := newHostileAPI(t)

	// The upstream echoes the request headers back. The host scrubs the
	// credentials it injected from everything the module reads.
	boxes, err := hm.List(context.Background(), hostileAcct(api, "echo"))
	if err != nil {
		t.Fatal(err)
	}
	if len(boxes) != 1 {
		t.Fatalf("%+v", boxes)
	}
	name := boxes[0].Name
	if !strings.Contains(name, "Authorization=Bearer [redacted]") || !strings.Contains(name, "X-Api-Key=[redacted]") {
		t.Fatalf("echo did not come back redacted: %q", name)
	}
	acct := hostileAcct(api, "echo")
	acct.Config["via"] = "error"
	_, err = hm.List(context.Background(), acct)
	ce := mustKind(t, err, core.KindInvalid, "echo:")
	for _, secret := range []string{hostileToken, hostileKey} {
		for what, text := range map[string]string{"box name": name, "error": ce.Error(), "logs": e.logs.String()} {
			if strings.Contains(text, secret) {
				t.Fatalf("secret visible in %s: %s", what, text)
			}
		}
	}
	if !strings.Contains(e.logs.String(), "echoed:") {
		t.Fatal("module stderr missing from the logs")
	}
}
