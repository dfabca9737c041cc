// Package providercontract checks an adapter against the whole
// core.Provider contract (core/provider.go) in one place. Every adapter's
// tests run it: docker against the real Engine, each first-party Wasm
// module against its provider's emulator.
package providercontract

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/internal/testsupport"
)

// Subject is one adapter, ready to make boxes.
type Subject struct {
	Provider core.Provider
	Account  core.Account
	// Options are the create options the adapter needs (an image, ...).
	Options map[string]string
	// MissingID is a well-formed box id the provider has never had.
	MissingID string
	// Tick, when set, runs between polls, e.g. to advance an emulated clock
	// so transitions that take time finish.
	Tick func()
	// Timeout bounds each wait for a box to reach a state; 0 means 60 s.
	Timeout time.Duration
	// Check, when set, runs on every error the adapter returns (to assert
	// no secret shows in it, say).
	Check func(t *testing.T, err error)
	// NoRecords is set for a provider that keeps no record of boxes (no
	// list, and every id is valid and made on first use: Cloudflare's
	// bridge), whose adapter's Get therefore cannot tell a deleted box
	// from a live one: companion's own records say it is deleted. Get
	// after delete is then not checked.
	NoRecords bool
}

// Run checks s.Provider against the contract: describe, create
// (idempotent by workspace label), get, list, suspend (idempotent),
// resume (idempotent), delete (idempotent: a gone box deletes fine), the
// kinds of not-found errors, and that what Describe's capabilities promise
// holds. It leaves no box behind.
func Run(t *testing.T, s Subject) {
	t.Helper()
	c := &checker{t: t, s: s}
	if c.s.Timeout == 0 {
		c.s.Timeout = 60 * time.Second
	}
	ctx := context.Background()

	info, err := s.Provider.Describe(ctx)
	c.ok("describe", err)
	if info.Name != s.Account.Provider || info.Version == "" || (info.Kind != "builtin" && info.Kind != "wasm") {
		t.Fatalf("describe: %+v; want name %q, a version and kind builtin or wasm", info, s.Account.Provider)
	}
	caps := info.Capabilities
	if !caps.Delete {
		t.Fatalf("describe: %s cannot delete; every adapter must", info.Name)
	}

	// Create labels the box with its workspace.
	wsID := core.NewID("ws")
	spec := core.CreateSpec{WorkspaceID: wsID, Name: "contract-" + wsID, Options: s.Options}
	box, err := s.Provider.Create(ctx, s.Account, spec)
	c.ok("create", err)
	if box.ID == "" || box.Labels[core.LabelWorkspace] != wsID {
		t.Fatalf("create: box %+v; want an id and label %s=%s", box, core.LabelWorkspace, wsID)
	}
	id := box.ID
	t.Cleanup(func() {
		if err := s.Provider.Delete(context.Background(), s.Account, id); err != nil {
			t.Errorf("cleanup: delete %s: %v", id, err)
		}
	})
	if box.State != core.StateCreating && box.State != core.StateRunning {
		t.Fatalf("create: state %s, want creating or running", box.State)
	}

	// Creating again for the same workspace makes no second box.
	again, err := s.Provider.Create(ctx, s.Account, spec)
	switch {
	case err == nil:
		if again.ID != id {
			t.Fatalf("second create for workspace %s made box %s besides %s", wsID, again.ID, id)
		}
	case core.IsKind(err, core.KindConflict):
		c.check(err)
	default:
		t.Fatalf("second create: %v; want the same box or a conflict", err)
	}

	running := c.waitState(id, core.StateRunning)
	if running.ID != id || running.Labels[core.LabelWorkspace] != wsID {
		t.Fatalf("get: %+v; want box %s labelled %s", running, id, wsID)
	}
	if caps.List {
		c.listedOnce(wsID, id)
	}
	if caps.LastActivity {
		c.poll("last activity of a running box", func() error {
			b, err := s.Provider.Get(ctx, s.Account, id)
			if err != nil {
				return err
			}
			if b.LastActivityAt.IsZero() {
				return errors.New("LastActivityAt is zero although the capability last_activity is promised")
			}
			return nil
		})
	}

	// Not found is KindNotFound, for every call that names a box.
	_, err = s.Provider.Get(ctx, s.Account, s.MissingID)
	c.kind("get of a box that never existed", err, core.KindNotFound)

	if caps.Suspend {
		b, err := s.Provider.Suspend(ctx, s.Account, id)
		c.ok("suspend", err)
		c.oneOf("suspend", b.State, core.StatePausing, core.StatePaused)
		c.waitState(id, core.StatePaused)
		b, err = s.Provider.Suspend(ctx, s.Account, id)
		c.ok("suspend of a paused box", err)
		c.oneOf("suspend of a paused box", b.State, core.StatePausing, core.StatePaused)

		b, err = s.Provider.Resume(ctx, s.Account, id)
		c.ok("resume", err)
		if caps.ResumeSameIdentity && b.ID != id {
			t.Fatalf("resume gave box %s a new id %s although resume_same_identity is promised", id, b.ID)
		}
		if b.ID != "" {
			id = b.ID
		}
		c.oneOf("resume", b.State, core.StateResuming, core.StateCreating, core.StateRunning)
		c.waitState(id, core.StateRunning)
		b, err = s.Provider.Resume(ctx, s.Account, id)
		c.ok("resume of a running box", err)
		c.oneOf("resume of a running box", b.State, core.StateResuming, core.StateRunning)

		_, err = s.Provider.Suspend(ctx, s.Account, s.MissingID)
		c.kind("suspend of a box that never existed", err, core.KindNotFound)
		_, err = s.Provider.Resume(ctx, s.Account, s.MissingID)
		c.kind("resume of a box that never existed", err, core.KindNotFound)
	} else {
		if _, err := s.Provider.Suspend(ctx, s.Account, id); err == nil {
			t.Fatal("suspend succeeded although the capability suspend is not promised")
		}
		c.waitState(id, core.StateRunning)
	}

	// Delete, and deleting again: a gone box deletes fine.
	c.ok("delete", s.Provider.Delete(ctx, s.Account, id))
	c.poll("the box to be gone after delete", func() error {
		if s.NoRecords {
			return nil
		}
		b, err := s.Provider.Get(ctx, s.Account, id)
		switch {
		case core.IsKind(err, core.KindNotFound):
			return nil
		case err != nil:
			return err
		case b.State == core.StateDeleted:
			return nil // a provider that keeps tombstones reports them deleted
		}
		return fmt.Errorf("box %s is %s after delete", id, b.State)
	})
	c.ok("delete of a deleted box", s.Provider.Delete(ctx, s.Account, id))
	c.ok("delete of a box that never existed", s.Provider.Delete(ctx, s.Account, s.MissingID))
	if caps.List {
		boxes, err := s.Provider.List(ctx, s.Account)
		c.ok("list after delete", err)
		for _, b := range boxes {
			if b.ID == id && b.State != core.StateDeleted && b.State != core.StateDeleting {
				t.Fatalf("list after delete shows box %s as %s", id, b.State)
			}
		}
	}
}

type checker struct {
	t *testing.T
	s Subject
}

func (c *checker) check(err error) {
	c.t.Helper()
	if err != nil && c.s.Check != nil {
		c.s.Check(c.t, err)
	}
}

func (c *checker) ok(what string, err error) {
	c.t.Helper()
	c.check(err)
	if err != nil {
		c.t.Fatalf("%s: %v", what, err)
	}
}

func (c *checker) kind(what string, err error, want core.ErrorKind) {
	c.t.Helper()
	c.check(err)
	if !core.IsKind(err, want) {
		c.t.Fatalf("%s: %v (kind %q), want kind %q", what, err, core.KindOf(err), want)
	}
}

func (c *checker) oneOf(what string, got core.State, want ...core.State) {
	c.t.Helper()
	if !slices.Contains(want, got) {
		c.t.Fatalf("%s: state %s, want one of %v", what, got, want)
	}
}

func (c *checker) poll(what string, check func() error) {
	c.t.Helper()
	if err := testsupport.PollErr(c.s.Timeout, func() error {
		if c.s.Tick != nil {
			c.s.Tick()
		}
		return check()
	}); err != nil {
		c.check(err)
		c.t.Fatalf("waiting for %s: %v", what, err)
	}
}

// waitState polls Get until the box is in state.
func (c *checker) waitState(id string, state core.State) core.Box {
	c.t.Helper()
	var b core.Box
	c.poll(fmt.Sprintf("box %s to be %s", id, state), func() error {
		var err error
		if b, err = c.s.Provider.Get(context.Background(), c.s.Account, id); err != nil {
			return err
		}
		if b.State != state {
			return fmt.Errorf("box %s is %s", id, b.State)
		}
		return nil
	})
	return b
}

// listedOnce checks List shows exactly one live box for the workspace.
func (c *checker) listedOnce(wsID, id string) {
	c.t.Helper()
	c.poll("the box in the list", func() error {
		boxes, err := c.s.Provider.List(context.Background(), c.s.Account)
		if err != nil {
			return err
		}
		var ids []string
		for _, b := range boxes {
			if b.Labels[core.LabelWorkspace] == wsID && b.State != core.StateDeleted && b.State != core.StateDeleting {
				ids = append(ids, b.ID)
			}
		}
		if len(ids) != 1 || ids[0] != id {
			return fmt.Errorf("list shows boxes %v for workspace %s, want only %s", ids, wsID, id)
		}
		return nil
	})
}
