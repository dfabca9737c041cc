package wasm

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"

	"github.com/canvasapp/companion/core"
)

// selfRSS is this process's resident set in bytes (/proc/self/status).
func selfRSS(b *testing.B) float64 {
	b.Helper()
	raw, err := os.ReadFile("/proc/self/status")
	if err != nil {
		b.Skipf("no /proc: %v", err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 64)
			if err != nil {
				b.Fatal(err)
			}
			return kb * 1024
		}
	}
	b.Fatal("no VmRSS")
	return 0
}

// BenchmarkMemoryAtMaximum loads 10 modules whose list grows linear memory
// to the module's maximum (4 MiB) and writes to every page of it, calls
// each 1,000 times, and reports the host's RSS growth against the sum of
// the modules' budgets (rss-budget-ratio; goal ≤ 1). Without host-mapped
// memory, an instance at its maximum cost 4–5× the maximum.
func BenchmarkMemoryAtMaximum(b *testing.B) {
	const modules, calls = 10, 1000
	e := newEnv(b)
	runtime.GC()
	debug.FreeOSMemory()
	before := selfRSS(b)
	var all []*Adapter
	for i := 0; i < modules; i++ {
		all = append(all, e.load(b, watModule(b, "grow_memory", func(m map[string]any) {
			m["name"] = fmt.Sprintf("grow-memory-%d", i)
			m["limits"] = map[string]any{"memory_mib": 4, "call_timeout_ms": 10000}
		})))
	}
	ctx := context.Background()
	b.ResetTimer()
	for n := 0; n < b.N; n++ {
		for _, a := range all {
			for i := 0; i < calls; i++ {
				if _, err := a.List(ctx, core.Account{ID: "x"}); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	b.StopTimer()
	after := selfRSS(b)
	var budget, peak float64
	for _, a := range all {
		m := a.Memory()
		budget += float64(m.BudgetBytes)
		peak = max(peak, float64(m.PeakBytes))
	}
	growth := max(after-before, 0)
	b.ReportMetric(growth/(1<<20), "rss-growth-MiB")
	b.ReportMetric(budget/(1<<20), "budget-sum-MiB")
	b.ReportMetric(growth/budget, "rss-budget-ratio")
	b.ReportMetric(peak/(1<<20), "peak-linear-MiB/module")
}
