// Package secrets keeps provider tokens out of companion's database: it
// stores them in the OS keyring (the Secret Service over D-Bus on Linux,
// Keychain on macOS, Credential Manager on Windows).
//
// Every entry lives under one keyring service name and is namespaced by the
// installation's instance id, so two data directories of one OS user never
// see each other's tokens. Values never appear in errors or logs.
package secrets

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/canvasapp/companion/core"

	"github.com/zalando/go-keyring"
)

// DefaultService is the keyring service name companion's entries use.
const DefaultService = "companion"

// Keyring is a core.Secrets backed by the OS keyring. The zero value is not
// usable: Namespace must be set.
type Keyring struct {
	// Service is the keyring service name; "" means DefaultService.
	Service string
	// Namespace prefixes every key, normally the store's instance id.
	Namespace string
	// Timeout bounds each keyring call. A locked keyring may wait for an
	// unlock prompt forever; 0 means 10 seconds.
	Timeout time.Duration
}

var _ core.Secrets = (*Keyring)(nil)

func (k *Keyring) service() string {
	if k.Service == "" {
		return DefaultService
	}
	return k.Service
}

func (k *Keyring) user(key string) string { return k.Namespace + "/" + key }

// Set stores value under key, replacing any previous value.
func (k *Keyring) Set(ctx context.Context, key, value string) error {
	_, err := k.call(ctx, "store", key, func() (string, error) {
		return "", keyring.Set(k.service(), k.user(key), value)
	})
	return err
}

// Get returns the value stored under key, or a core.KindNotFound error.
func (k *Keyring) Get(ctx context.Context, key string) (string, error) {
	return k.call(ctx, "read", key, func() (string, error) {
		return keyring.Get(k.service(), k.user(key))
	})
}

// Delete removes key. Deleting a missing key is a core.KindNotFound error.
func (k *Keyring) Delete(ctx context.Context, key string) error {
	_, err := k.call(ctx, "delete", key, func() (string, error) {
		return "", keyring.Delete(k.service(), k.user(key))
	})
	return err
}

// Check verifies that the keyring is reachable and unlocked (Answers).
func (k *Keyring) Check(ctx context.Context) error { return Answers(ctx, k) }

// Answers reports whether a secret store answers, by reading an entry
// that does not exist: a read that never prompts for an unlock.
func Answers(ctx context.Context, s core.Secrets) error {
	_, err := s.Get(ctx, "companion-keyring-check")
	if core.IsKind(err, core.KindNotFound) {
		return nil
	}
	return err
}

// call runs f with a timeout and turns keyring errors into core errors
// whose messages say what to do. The goroutine of a call that timed out is
// left to finish on its own: the keyring library offers no cancellation.
func (k *Keyring) call(ctx context.Context, verb, key string, f func() (string, error)) (string, error) {
	timeout := k.Timeout
	if timeout == 0 {
		timeout = 10 * time.Second
	}
	if err := noSessionBus(); err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	type result struct {
		v   string
		err error
	}
	done := make(chan result, 1)
	go func() {
		v, err := f()
		done <- result{v, err}
	}()
	select {
	case r := <-done:
		if r.err == nil {
			return r.v, nil
		}
		return "", classify(verb, key, r.err)
	case <-ctx.Done():
		return "", &core.Error{
			Kind:    core.KindUnavailable,
			Message: fmt.Sprintf("the OS keyring did not answer within %s (could not %s %s); unlock your keyring and try again", timeout, verb, key),
			Err:     ctx.Err(),
		}
	}
}

func classify(verb, key string, err error) error {
	switch {
	case errors.Is(err, keyring.ErrNotFound):
		return &core.Error{Kind: core.KindNotFound, Message: fmt.Sprintf("secret %s not found in the OS keyring", key), Err: err}
	case errors.Is(err, keyring.ErrSetDataTooBig):
		return &core.Error{Kind: core.KindInvalid, Message: fmt.Sprintf("secret %s is too large for the OS keyring", key), Err: err}
	}
	// The library's errors describe D-Bus or platform failures, never the
	// value, so they are safe to include.
	return &core.Error{
		Kind: core.KindUnavailable,
		Message: fmt.Sprintf("could not %s %s in the OS keyring: %v; on Linux a Secret Service (such as gnome-keyring) must be running and unlocked in your session",
			verb, key, err),
		Err: err,
	}
}
