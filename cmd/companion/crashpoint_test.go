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
	t.Setenv(crashEnv, exportCrashPoint)
	if h, err := crashHook(log); err != nil || h != nil {
		t.Fatalf("%s: delete hook %v, err %v; want none, no error", exportCrashPoint, h != nil, err)
	}
	if exportHook(log) == nil {
		t.Fatalf("%s: no exporter hook", exportCrashPoint)
	}
	t.Setenv(crashEnv, "delete:verify")
	if exportHook(log) != nil {
		t.Fatal("delete:verify armed the exporter's hook")
	}
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
