package main

import (
	"io"
	"log/slog"
	"strings"
	"testing"
)

// TestCrashHookOnlyWithItsEnv: no env, no hook; a value that names no
// step of the delete pipeline stops companion with the steps listed.
func TestCrashHookOnlyWithItsEnv(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	t.Setenv(crashEnv, "")
	for _, bad := range []string{"", "delete", "delete:nope", "pause:lock"} {
		t.Setenv(crashEnv, bad)
		if h, err := crashHook(log); err == nil || h != nil || !strings.Contains(err.Error(), "provider_delete") {
			t.Errorf("%s=%q: hook %v, err %v", crashEnv, bad, h != nil, err)
		}
	}
	t.Setenv(crashEnv, "delete:verify")
	if h, err := crashHook(log); err != nil || h == nil {
		t.Fatalf("delete:verify: %v", err)
	}
}

// TestNoCrashHookWithoutEnv runs in a process without the variable.
func TestNoCrashHookWithoutEnv(t *testing.T) {
	if _, set := lookupCrashEnv(); set {
		t.Skip(crashEnv + " is set in this environment")
	}
	if h, err := crashHook(slog.New(slog.NewTextHandler(io.Discard, nil))); h != nil || err != nil {
		t.Fatalf("hook without the env var: %v %v", h != nil, err)
	}
}
