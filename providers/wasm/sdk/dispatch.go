package sdk

import (
	"context"
	"errors"
	"time"
)

// The input of an op (ABI.md "Ops"), as parseInput reads it.

type accountJSON struct {
	ID     string
	Config map[string]string
}

type lifecycleJSON struct {
	IdlePauseAfterSeconds int64
	PausedTTLSeconds      int64
}

type specJSON struct {
	WorkspaceID string
	Name        string
	Lifecycle   lifecycleJSON
	Options     map[string]string
	Labels      map[string]string
	AgentKey    string
}

type inputJSON struct {
	DeadlineUnixMS int64
	Account        accountJSON
	BoxID          string
	Spec           *specJSON
}

// op numbers the ops, so the exports need no string compares (a byte
// loop each inside the sandbox).
type op uint8

const (
	opUnknown op = iota
	opDescribe
	opList
	opGet
	opCreate
	opSuspend
	opResume
	opDelete
	opEndpoint
)

var opNames = [...]string{"unknown", "describe", "list", "get", "create", "suspend", "resume", "delete", "endpoint"}

func (o op) String() string { return opNames[o] }

func opOf(name string) op {
	for i, n := range opNames {
		if i > 0 && n == name {
			return op(i)
		}
	}
	return opUnknown
}

// Dispatch runs op on the registered provider with the input JSON and
// returns the result envelope. The exports call it; it is exported so a
// module's logic can be tested natively, without a wasm build.
func Dispatch(op string, input []byte) []byte {
	var e encoder
	o := opOf(op)
	if o == opUnknown {
		e.errorEnvelope(Errorf(Invalid, "unknown op %q", op))
		return e.b
	}
	dispatch(&e, o, input)
	return e.b
}

// dispatch appends op's result envelope to e.
func dispatch(e *encoder, op op, input []byte) {
	mark := len(e.b)
	defer func() {
		if r := recover(); r != nil {
			e.b = e.b[:mark]
			e.errorEnvelope(Errorf(Internal, "%s panicked: %v", op, r))
		}
	}()
	if registered == nil {
		e.errorEnvelope(Errorf(Internal, "the module did not call sdk.Register in init"))
		return
	}
	// parseInput copies input: config values handed to the provider must
	// not alias a buffer the host reuses.
	in, err := parseInput(input)
	if err != nil {
		e.errorEnvelope(Errorf(Invalid, "malformed %s input: %v", op, err))
		return
	}
	ctx := context.Context(context.Background())
	if in.DeadlineUnixMS > 0 {
		ctx = deadlineCtx(in.DeadlineUnixMS)
	}
	acct := Account{ID: in.Account.ID, Config: in.Account.Config}
	if acct.Config == nil {
		acct.Config = map[string]string{}
	}
	if err := run(ctx, e, op, acct, &in); err != nil {
		e.b = e.b[:mark]
		e.errorEnvelope(asError(err))
	}
}

func run(ctx context.Context, e *encoder, op op, acct Account, in *inputJSON) error {
	p := registered
	box := func(b Box, err error) error {
		if err != nil {
			return err
		}
		e.b = append(appendBox(append(e.b, `{"ok":{"box":`...), &b), `}}`...)
		return nil
	}
	switch op {
	case opDescribe:
		info, err := p.Describe(ctx)
		if err != nil {
			return err
		}
		b := appendStr(append(e.b, `{"ok":{"name":`...), info.Name)
		b = appendStr(append(b, `,"version":`...), info.Version)
		if info.Capabilities != nil {
			b = appendCaps(append(b, `,"capabilities":`...), info.Capabilities)
		}
		e.b = append(b, `}}`...)
		return nil
	case opList:
		boxes, err := p.List(ctx, acct)
		if err != nil {
			return err
		}
		b := append(e.b, `{"ok":{"boxes":[`...)
		for i := range boxes {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendBox(b, &boxes[i])
		}
		e.b = append(b, `]}}`...)
		return nil
	case opGet:
		return box(p.Get(ctx, acct, in.BoxID))
	case opCreate:
		var spec CreateSpec
		if in.Spec != nil {
			spec = CreateSpec{
				WorkspaceID: in.Spec.WorkspaceID,
				Name:        in.Spec.Name,
				Lifecycle: Lifecycle{
					IdlePauseAfter: time.Duration(in.Spec.Lifecycle.IdlePauseAfterSeconds) * time.Second,
					PausedTTL:      time.Duration(in.Spec.Lifecycle.PausedTTLSeconds) * time.Second,
				},
				Options:  in.Spec.Options,
				Labels:   in.Spec.Labels,
				AgentKey: in.Spec.AgentKey,
			}
		}
		if spec.Labels == nil {
			spec.Labels = map[string]string{LabelWorkspace: spec.WorkspaceID}
		}
		if spec.Options == nil {
			spec.Options = map[string]string{}
		}
		return box(p.Create(ctx, acct, spec))
	case opSuspend:
		return box(p.Suspend(ctx, acct, in.BoxID))
	case opResume:
		return box(p.Resume(ctx, acct, in.BoxID))
	case opEndpoint:
		ep, ok := p.(Endpointer)
		if !ok {
			return unsupported("endpoint")
		}
		x, err := ep.Endpoint(ctx, acct, in.BoxID)
		if err != nil {
			return err
		}
		b := appendStr(append(e.b, `{"ok":{"endpoint":{"url":`...), x.URL)
		b = appendStrMap(append(b, `,"headers":`...), x.Headers)
		e.b = append(b, `}}}`...)
		return nil
	case opDelete:
		if err := p.Delete(ctx, acct, in.BoxID); err != nil {
			return err
		}
		e.raw(`{"ok":{}}`)
		return nil
	}
	return Errorf(Invalid, "unknown op %s", op)
}

func asError(err error) *Error {
	var e *Error
	if !errors.As(err, &e) {
		e = &Error{Kind: Internal, Message: err.Error()}
		if errors.Is(err, context.DeadlineExceeded) {
			e.Kind = Unavailable
		}
	}
	return e
}

// deadlineCtx carries the host's deadline (Unix milliseconds) without a
// runtime timer (a timer costs more than the rest of a small op inside the
// sandbox). It is never cancelled from inside: the host stops the call at
// the deadline. Code that wants to give up earlier compares time.Now with
// Deadline, as Client.Do does.
type deadlineCtx int64

func (c deadlineCtx) Deadline() (time.Time, bool) { return time.UnixMilli(int64(c)), true }
func (deadlineCtx) Done() <-chan struct{}         { return nil }
func (deadlineCtx) Err() error                    { return nil }
func (deadlineCtx) Value(any) any                 { return nil }
