package main

import (
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"

	"github.com/canvasapp/companion/core"
)

// crashEnv names the test-only crash point. It is read once at start-up;
// without it no crash hook exists at all.
const crashEnv = "COMPANION_TEST_CRASH_AT"

// crashHook returns the delete pipeline's step hook for
// COMPANION_TEST_CRASH_AT=delete:<step>: the process SIGKILLs itself right
// after that step is journaled, as a power cut would stop it. It exists
// only for the crash tests (e2e); unset, it returns nil. A value that
// names no step stops companion, so a typo cannot make a crash test pass
// by never crashing.
func crashHook(log *slog.Logger) (func(core.OpKind, string), error) {
	v, ok := lookupCrashEnv()
	if !ok {
		return nil, nil
	}
	kind, step, _ := strings.Cut(v, ":")
	if core.OpKind(kind) != core.OpDelete || !slices.Contains(core.DeleteSteps, step) {
		return nil, fmt.Errorf("%s=%q: want delete:<step>, a step of %s (a test-only setting: unset it)", crashEnv, v, strings.Join(core.DeleteSteps, ", "))
	}
	log.Warn("test-only crash point armed: companion kills itself when a delete journals this step", "env", crashEnv, "step", step)
	return func(k core.OpKind, s string) {
		if k == core.OpDelete && s == step {
			log.Warn("test-only crash point reached; SIGKILL", "step", s)
			if self, err := os.FindProcess(os.Getpid()); err == nil {
				self.Kill() // SIGKILL on Unix: no deferred clean-up runs
			}
			select {} // never go on past the crash point
		}
	}, nil
}

func lookupCrashEnv() (string, bool) { return os.LookupEnv(crashEnv) }
