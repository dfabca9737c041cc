package sdk

import (
	"context"
	"errors"
	"time"
)

// The JSON of ABI v1 (ABI.md "Ops").

type accountJSON struct {
	ID     string            `json:"id"`
	Config map[string]string `json:"config"`
}

type lifecycleJSON struct {
	IdlePauseAfterSeconds int64 `json:"idle_pause_after_seconds,omitempty"`
	PausedTTLSeconds      int64 `json:"paused_ttl_seconds,omitempty"`
}

type specJSON struct {
	WorkspaceID string            `json:"workspace_id"`
	Name        string            `json:"name"`
	Lifecycle   lifecycleJSON     `json:"lifecycle"`
	Options     map[string]string `json:"options"`
	Labels      map[string]string `json:"labels"`
}

type inputJSON struct {
	DeadlineUnixMS int64        `json:"deadline_unix_ms"`
	Account        *accountJSON `json:"account"`
	BoxID          string       `json:"box_id"`
	Spec           *specJSON    `json:"spec"`
}

// Dispatch runs op on the registered provider with the input JSON and
// returns the result envelope. The exports call it; it is exported so a
// module's logic can be tested natively, without a wasm build.
func Dispatch(op string, input []byte) []byte {
	var e encoder
	dispatch(&e, op, input)
	return e.b
}

// dispatch appends op's result envelope to e.
func dispatch(e *encoder, op string, input []byte) {
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
	// string() copies: config values handed to the provider must not
	// alias a buffer the host reuses.
	in, err := parseInput(string(input))
	if err != nil {
		e.errorEnvelope(Errorf(Invalid, "malformed %s input: %v", op, err))
		return
	}
	ctx := context.Context(context.Background())
	if in.DeadlineUnixMS > 0 {
		ctx = deadlineCtx{dl: time.UnixMilli(in.DeadlineUnixMS)}
	}
	var acct Account
	if in.Account != nil {
		acct = Account{ID: in.Account.ID, Config: in.Account.Config}
	}
	if acct.Config == nil {
		acct.Config = map[string]string{}
	}
	if err := run(ctx, e, op, acct, &in); err != nil {
		e.b = e.b[:mark]
		e.errorEnvelope(asError(err))
	}
}

func run(ctx context.Context, e *encoder, op string, acct Account, in *inputJSON) error {
	p := registered
	box := func(b Box, err error) error {
		if err != nil {
			return err
		}
		e.raw(`{"ok":{"box":`)
		e.box(&b)
		e.raw(`}}`)
		return nil
	}
	switch op {
	case "describe":
		info, err := p.Describe(ctx)
		if err != nil {
			return err
		}
		e.raw(`{"ok":{"name":`)
		e.str(info.Name)
		e.raw(`,"version":`)
		e.str(info.Version)
		if info.Capabilities != nil {
			e.raw(`,"capabilities":`)
			e.caps(info.Capabilities)
		}
		e.raw(`}}`)
		return nil
	case "list":
		boxes, err := p.List(ctx, acct)
		if err != nil {
			return err
		}
		e.raw(`{"ok":{"boxes":[`)
		for i := range boxes {
			if i > 0 {
				e.b = append(e.b, ',')
			}
			e.box(&boxes[i])
		}
		e.raw(`]}}`)
		return nil
	case "get":
		return box(p.Get(ctx, acct, in.BoxID))
	case "create":
		var spec CreateSpec
		if in.Spec != nil {
			spec = CreateSpec{
				WorkspaceID: in.Spec.WorkspaceID,
				Name:        in.Spec.Name,
				Lifecycle: Lifecycle{
					IdlePauseAfter: time.Duration(in.Spec.Lifecycle.IdlePauseAfterSeconds) * time.Second,
					PausedTTL:      time.Duration(in.Spec.Lifecycle.PausedTTLSeconds) * time.Second,
				},
				Options: in.Spec.Options,
				Labels:  in.Spec.Labels,
			}
		}
		if spec.Labels == nil {
			spec.Labels = map[string]string{LabelWorkspace: spec.WorkspaceID}
		}
		if spec.Options == nil {
			spec.Options = map[string]string{}
		}
		return box(p.Create(ctx, acct, spec))
	case "suspend":
		return box(p.Suspend(ctx, acct, in.BoxID))
	case "resume":
		return box(p.Resume(ctx, acct, in.BoxID))
	case "delete":
		if err := p.Delete(ctx, acct, in.BoxID); err != nil {
			return err
		}
		e.raw(`{"ok":{}}`)
		return nil
	}
	return Errorf(Invalid, "unknown op %q", op)
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

// deadlineCtx carries the host's deadline without a runtime timer (a
// timer costs more than the rest of a small op inside the sandbox). It is
// never cancelled from inside: the host stops the call at the deadline.
// Code that wants to give up earlier compares time.Now with Deadline, as
// Client.Do does.
type deadlineCtx struct{ dl time.Time }

func (c deadlineCtx) Deadline() (time.Time, bool) { return c.dl, true }
func (deadlineCtx) Done() <-chan struct{}         { return nil }
func (deadlineCtx) Err() error                    { return nil }
func (deadlineCtx) Value(any) any                 { return nil }
