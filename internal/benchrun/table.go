package main

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"time"
)

// printTable writes the run's figures as a Markdown table, headed by the
// machine, ready to paste into docs/benchmarks.md.
func printTable(w io.Writer) {
	if len(emitted) == 0 {
		return
	}
	fmt.Fprintf(w, "\nMeasured on %s, %d cores (nproc), %s, %s.\n\n", cpuModel(), runtime.NumCPU(), runtime.Version(), time.Now().UTC().Format("2006-01-02"))
	fmt.Fprintln(w, "| figure | value | baseline (same run) | ratio | goal | met |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|")
	for _, f := range emitted {
		if f.Baseline == "" && f.Goal == "" {
			continue // a baseline of its own, shown beside the figure it serves
		}
		base, ratio, m := "—", "—", ""
		if f.Baseline != "" {
			base = fmt.Sprintf("%s %s (%s)", num(f.BaselineValue), f.Unit, f.Baseline)
		}
		if f.Ratio != 0 {
			ratio = fmt.Sprintf("%.2f", f.Ratio)
		}
		if f.Met != nil {
			m = map[bool]string{true: "yes", false: "**no**"}[*f.Met]
		}
		fmt.Fprintf(w, "| %s | %s %s | %s | %s | %s | %s |\n", f.Name, num(f.Value), f.Unit, base, ratio, f.Goal, m)
	}
}

func num(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.3g", v)
	}
}

func cpuModel() string {
	raw, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return runtime.GOARCH
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return runtime.GOARCH
}
