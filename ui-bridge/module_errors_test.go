package uibridge

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/canvasapp/companion/core"
)

// fault stands in for providers/wasm.ModuleError: any error with a
// ModuleFault method in the chain is a module's doing.
type fault struct {
	module, op, field string
	err               error
}

func (f *fault) Error() string                         { return f.err.Error() }
func (f *fault) Unwrap() error                         { return f.err }
func (f *fault) ModuleFault() (string, string, string) { return f.module, f.op, f.field }

func TestModuleErrorsAreNamed(t *testing.T) {
	logs := &syncBuffer{}
	s := &Server{log: slogTo(logs)}
	secret := "tok-do-not-show"
	detail := errors.New("wasm trap with " + secret)
	cases := []struct {
		err                  error
		status               int
		code, op, field, msg string
	}{
		{&core.Error{Kind: core.KindInvalid, Message: "provider module acme was refused: its describe says version \"2\"", Err: &fault{"acme", "describe", "version", detail}},
			422, codeModuleRejected, "describe", "version", "was refused"},
		{&core.Error{Kind: core.KindInternal, Message: "provider module acme failed during list and was stopped: companion_alloc(4096) returned 0", Err: &fault{"acme", "list", "", detail}},
			502, codeModuleFailed, "list", "", "companion_alloc(4096) returned 0"},
		// Wrapped further by core: still named.
		{fmt.Errorf("add account: %w", &core.Error{Kind: core.KindInternal, Message: "provider module acme contradicts its manifest in describe (version)", Err: &fault{"acme", "describe", "version", detail}}),
			502, codeModuleFailed, "describe", "version", "contradicts"},
		{&core.Error{Kind: core.KindUnavailable, Message: "provider module acme did not finish list within 1s and was stopped", Err: &fault{"acme", "list", "", detail}},
			503, "unavailable", "list", "", "did not finish"},
	}
	for _, c := range cases {
		rec := httptest.NewRecorder()
		s.writeError(rec, httptest.NewRequest("POST", "/v1/accounts", nil), c.err)
		var er ErrorResponse
		if err := json.Unmarshal(rec.Body.Bytes(), &er); err != nil {
			t.Fatal(err)
		}
		d := er.Error
		if rec.Code != c.status || d.Code != c.code || d.Module != "acme" || d.Operation != c.op || d.Field != c.field || !strings.Contains(d.Message, c.msg) {
			t.Errorf("%v: %d %+v; want %d %s acme/%s/%s %q", c.err, rec.Code, d, c.status, c.code, c.op, c.field, c.msg)
		}
		if strings.Contains(rec.Body.String(), secret) || strings.Contains(logs.String(), secret) {
			t.Errorf("%v: the module's internal detail leaked: %s", c.err, rec.Body.String())
		}
	}
}
