package modules_test

import (
	"context"
	"testing"

	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/e2e/emulators/digitalocean"
)

// TestDigitalOceanDeleteRefusals: a staff-locked session (423) and one a
// checkpoint holds (409) are conflicts, not successes and not "gone", so
// core keeps the workspace and says why.
func TestDigitalOceanDeleteRefusals(t *testing.T) {
	d := newDO(t, digitalocean.Options{}, nil)
	ctx := context.Background()

	locked := d.do.Seed(digitalocean.Session{Status: digitalocean.StatusLocked})
	d.mustKind(d.prov.Delete(ctx, d.acct, locked.SessionID), core.KindConflict)

	held := d.do.Seed(digitalocean.Session{})
	d.do.Hold(held.SessionID, "checkpoint")
	ce := d.mustKind(d.prov.Delete(ctx, d.acct, held.SessionID), core.KindConflict)
	if s, _ := d.do.Session(held.SessionID); s.Status != digitalocean.StatusReady {
		t.Fatalf("a refused delete changed the session: %s (%v)", s.Status, ce)
	}
	d.do.Release(held.SessionID)
	d.delete(d.acct, held.SessionID)
	if s, _ := d.do.Session(held.SessionID); s.Status != digitalocean.StatusDestroyed {
		t.Fatalf("after release: %s", s.Status)
	}
}
