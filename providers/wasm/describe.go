package wasm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/providers/wasm/internal/hostcall"
	"github.com/canvasapp/companion/providers/wasm/internal/manifest"
	"github.com/canvasapp/companion/providers/wasm/internal/sandbox"
	"github.com/canvasapp/companion/providers/wasm/internal/wire"
)

// callDescribe runs the module's describe in the sandbox, as any call.
func callDescribe(ctx context.Context, mod *sandbox.Module, m *manifest.Manifest, policy *hostcall.Policy) (wire.DescribeOut, error) {
	var d wire.DescribeOut
	in := wire.NewInput(time.Now().Add(m.Limits.CallTimeout()), nil)
	raw := wire.AppendInput(nil, &in)
	hc := policy.NewCall(nil)
	res, err := mod.Call(ctx, wire.OpDescribe, raw, hc)
	if err != nil {
		return d, err
	}
	eb, err := wire.DecodeDescribe(res, &d)
	switch {
	case errors.Is(err, wire.ErrSyntax):
		return d, core.Errorf(core.KindInternal, "provider module %s returned a malformed result from describe (want {\"ok\":…} or {\"error\":…})", m.Name)
	case err != nil:
		return d, core.Errorf(core.KindInternal, "provider module %s returned a malformed describe result: %s", m.Name, wire.CleanMessage(err.Error()))
	case eb != nil:
		return d, core.Errorf(core.KindInternal, "provider module %s answered describe with an error: %s", m.Name, wire.CleanMessage(hc.Redact(eb.Message)))
	}
	return d, nil
}

// describeMismatch compares what a module's describe says with its
// manifest and names the first field that differs.
func describeMismatch(m *manifest.Manifest, d wire.DescribeOut) (field string, err error) {
	if d.Name != m.Name {
		return "name", fmt.Errorf("its describe says name %q but its manifest says %q", wire.CleanMessage(d.Name), m.Name)
	}
	if d.Version != m.Version {
		return "version", fmt.Errorf("its describe says version %q but its manifest says %q", wire.CleanMessage(d.Version), m.Version)
	}
	declared := core.Capabilities(m.Capabilities)
	if d.Capabilities == nil || *d.Capabilities == declared {
		return "", nil
	}
	said, want := capFlags(*d.Capabilities), capFlags(declared)
	names := make([]string, 0, len(want))
	for k := range want {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if said[k] != want[k] {
			return "capabilities." + k, fmt.Errorf("its describe says capabilities.%s is %t but its manifest says %t", k, said[k], want[k])
		}
	}
	return "capabilities", errors.New("its describe reports capabilities that differ from its manifest")
}

func capFlags(c core.Capabilities) map[string]bool {
	b, _ := json.Marshal(c)
	var out map[string]bool
	_ = json.Unmarshal(b, &out)
	return out
}
