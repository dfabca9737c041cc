package wasm

import (
	"errors"

	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/providers/wasm/internal/sandbox"
)

// ModuleError marks an error a module caused. It travels as the Err of a
// *core.Error whose Message names the module, the operation and the reason
// (and is safe to show). The HTTP layer recognises it by its ModuleFault
// method and answers a module refused at inspect or install (KindInvalid)
// with 422 and a module failing at run time (KindInternal) with 502,
// never 500.
type ModuleError struct {
	Module string
	Op     string // the operation: describe, list, …, load, inspect, install
	Field  string // a manifest field the module contradicts, if any
	Err    error
}

func (e *ModuleError) Error() string {
	if e.Err == nil {
		return "provider module " + e.Module + " failed during " + e.Op
	}
	return e.Err.Error()
}

func (e *ModuleError) Unwrap() error { return e.Err }

// ModuleFault names the module, the operation and the field.
func (e *ModuleError) ModuleFault() (module, op, field string) { return e.Module, e.Op, e.Field }

// moduleFault returns err, a failure of op on module, marked as a
// ModuleError unless it already is one or is not the module's doing (a
// provider's own answer, such as not_found or unauthorized, is left as is).
// CallOutcome classifies a call's error for metrics: "ok"; "error", an
// answer of the provider (or of the module about it); "time_budget" or
// "memory_budget", the module exceeded its call timeout or its memory
// and was stopped; "fault", any other internal or unavailable failure
// (the module's, or the provider's unavailability).
func CallOutcome(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, sandbox.ErrTimeBudget):
		return "time_budget"
	case errors.Is(err, sandbox.ErrMemoryBudget):
		return "memory_budget"
	}
	var me *ModuleError
	if errors.As(err, &me) {
		return "fault"
	}
	return "error"
}

func moduleFault(module, op string, err error) error {
	var ce *core.Error
	if err == nil || !errors.As(err, &ce) {
		return err
	}
	if ce.Kind != core.KindInternal && ce.Kind != core.KindUnavailable {
		return err
	}
	var me *ModuleError
	if errors.As(err, &me) {
		return err
	}
	out := *ce
	out.Err = &ModuleError{Module: module, Op: op, Err: ce.Err}
	return &out
}

// refused is a module refused at inspect or install: a 422 naming the
// module, the step and (when known) the manifest field.
func refused(module, op, field string, err error) error {
	return &core.Error{
		Kind:    core.KindInvalid,
		Message: "provider module " + module + " was refused: " + err.Error(),
		Err:     &ModuleError{Module: module, Op: op, Field: field, Err: err},
	}
}
