package wasm

import (
	"strings"
	"time"

	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/providers/wasm/internal/hostcall"
)

var (
	_ core.Budgeter      = (*Adapter)(nil)
	_ core.ConfigChecker = (*Adapter)(nil)
)

// budgetSlack is added to twice the call timeout, so a call that failed
// fast still has room for a retry after a short backoff.
const budgetSlack = 5 * time.Second

// ActionBudget implements core.Budgeter: one action may take twice the
// module's call timeout plus 5 s in total, retries and backoff included
// (ABI.md "Limits"). Zero before the manifest is read.
func (a *Adapter) ActionBudget() time.Duration {
	select {
	case <-a.parsed:
	default:
		return 0
	}
	if a.man == nil {
		return 0
	}
	return 2*a.man.Limits.CallTimeout() + budgetSlack
}

// CheckConfig implements core.ConfigChecker: the account's upstream
// overrides must be https://, or plain http:// toward loopback only.
func (a *Adapter) CheckConfig(cfg map[string]string) error {
	a.h.Start()
	<-a.parsed
	if a.man == nil {
		return nil // the load error is reported by Describe
	}
	if err := a.man.CheckAccountConfig(cfg); err != nil {
		return core.Errorf(core.KindInvalid, "%v", err)
	}
	return nil
}

// checkBox applies the credential rule to a box a module returned: an id
// that carries a credential of the account, or was built from an echo the
// host redacted, is refused (ids are stored and sent back in later calls,
// so they cannot be rewritten); every other text field is redacted.
func checkBox(hc *hostcall.Call, module, op string, b *core.Box) error {
	if hc.Leaks(b.ID) || hc.Echoed() && strings.Contains(b.ID, hostcall.Redacted) {
		return core.Errorf(core.KindInternal, "provider module %s returned from %s a box id that carries the account's credential; the result was dropped", module, op)
	}
	b.Name = hc.Redact(b.Name)
	b.URL = hc.Redact(b.URL)
	for k, v := range b.Labels {
		rk, rv := hc.Redact(k), hc.Redact(v)
		if rk != k || rv != v {
			delete(b.Labels, k)
			b.Labels[rk] = rv
		}
	}
	return nil
}
