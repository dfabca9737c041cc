// Command benchrun is `make bench`: it runs companion's benchmarks and
// prints each figure as one JSON line, with the baseline measured in the
// same run (or the goal, where the figure has no natural baseline) and
// their ratio, so results can be compared run to run.
//
// Figures come from two places: Go benchmarks in the packages (run with
// `go test -bench`, their custom metrics parsed from the output), and the
// desktop start-up measurement, which this command makes itself because
// it needs the built binary.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
)

// figure is one output line.
type figure struct {
	Name  string  `json:"name"`
	Value float64 `json:"value"`
	Unit  string  `json:"unit"`
	// Baseline is the comparison measured in the same run, if any.
	Baseline      string  `json:"baseline,omitempty"`
	BaselineValue float64 `json:"baseline_value,omitempty"`
	// Ratio is Value/BaselineValue, or Value/Goal when there is no
	// baseline (so ≤ 1 meets the goal for "at most" goals).
	Ratio float64 `json:"ratio,omitempty"`
	Goal  string  `json:"goal,omitempty"`
	Met   *bool   `json:"met,omitempty"`
}

// emitted keeps every figure for the summary table.
var emitted []figure

func emit(f figure) {
	emitted = append(emitted, f)
	enc := json.NewEncoder(os.Stdout)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(f); err != nil {
		fmt.Fprintln(os.Stderr, "benchrun:", err)
	}
}

func main() {
	only := flag.String("only", "", "run only the groups whose name contains this (startup, store, stream, wasm)")
	runs := flag.Int("startup-runs", 9, "start-ups measured per binary and store size (half that at 100k workspaces)")
	// 200 rounds, not 40: at 40 the fan-out ratios of repeated runs on
	// the 2-core machine spread over 1.0-1.35 for either server; at 200,
	// over 0.94-1.09 (docs/decisions.md, "Fan-out rounds").
	rounds := flag.Int("rounds", 200, "broadcasts timed per server in the fan-out benchmark")
	flag.Parse()
	raiseNoFile()
	failed := false
	for _, g := range groups(*runs, *rounds) {
		if *only != "" && !contains(g.name, *only) {
			continue
		}
		fmt.Fprintf(os.Stderr, "benchrun: %s\n", g.name)
		if err := g.run(); err != nil {
			fmt.Fprintf(os.Stderr, "benchrun: %s: %v\n", g.name, err)
			failed = true
		}
	}
	printTable(os.Stderr)
	if dataRoot != "" {
		os.RemoveAll(dataRoot)
	}
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
	if failed {
		os.Exit(1)
	}
}

type group struct {
	name string
	run  func() error
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

func met(ok bool) *bool { return &ok }
