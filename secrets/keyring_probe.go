package secrets

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"time"

	"github.com/canvasapp/companion/core"
)

// Probe tells whether the keyring answers and keeps what it is given: it
// stores a random entry, reads it back and deletes it, each call bounded
// by timeout. A nil error means companion can use the keyring.
func (k *Keyring) Probe(ctx context.Context, timeout time.Duration) error {
	p := *k
	p.Timeout = timeout
	var b [12]byte
	rand.Read(b[:])
	key, value := "companion-probe/"+hex.EncodeToString(b[:6]), hex.EncodeToString(b[6:])
	if err := p.Set(ctx, key, value); err != nil {
		return err
	}
	got, err := p.Get(ctx, key)
	if derr := p.Delete(ctx, key); err == nil && derr != nil {
		err = derr
	}
	if err != nil {
		return err
	}
	if got != value {
		return core.Errorf(core.KindUnavailable, "the OS keyring gave back another value than it was given for %s", key)
	}
	return nil
}
