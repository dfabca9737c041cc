package wasm

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"sync/atomic"
	"testing"

	"github.com/canvasapp/companion/core"
)

// TestMinimalWAT runs the hand-written WebAssembly text example (assembled
// by wat2wasm in TestMain) through the host: the ABI needs no Go SDK.
func TestMinimalWAT(t *testing.T) {
	mjson, err := os.ReadFile("examples/minimal-wat/manifest.json")
	if err != nil {
		t.Fatal(err)
	}
	bin, err := Pack(watRaw["minimal"], mjson)
	if err != nil {
		t.Fatal(err)
	}
	const token = "tok-MINIMAL-0123456789"
	var pings atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/ping" || r.Header.Get("Authorization") != "Bearer "+token {
			w.WriteHeader(401)
			return
		}
		pings.Add(1)
		w.Write([]byte(`{"pong":true}`))
	}))
	defer srv.Close()

	e := newEnv(t)
	e.setCred(t, "acc-m", "token", token)
	a := e.load(t, bin)
	ctx := context.Background()
	info, err := a.Describe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.Name != "minimal" || info.Version != "0.1.0" || !info.Capabilities.List || info.Capabilities.Suspend {
		t.Fatalf("%+v", info)
	}
	acct := core.Account{ID: "acc-m", Provider: "minimal", Config: map[string]string{"api_url": srv.URL}}
	for i := 0; i < 3; i++ {
		boxes, err := a.List(ctx, acct)
		if err != nil {
			t.Fatal(err)
		}
		if len(boxes) != 0 {
			t.Fatalf("%+v", boxes)
		}
	}
	if pings.Load() != 3 {
		t.Fatalf("%d pings", pings.Load())
	}
	// When the host reports a failure, the module turns it into its own
	// error envelope.
	srv.Close()
	_, err = a.List(ctx, acct)
	mustKind(t, err, core.KindUnavailable, "the ping request failed")
	// Ops the module does not export are refused by the host.
	_, err = a.Get(ctx, acct, "x")
	mustKind(t, err, core.KindInvalid, "does not implement get")
	if st := a.Stats(); st.Discarded != 0 || st.Created != 1 {
		t.Fatalf("%+v", st)
	}
}
