package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"time"
)

// measureStartup builds companion and the bare baseline server, then starts
// each runs times (interleaved, so machine noise hits all alike) and
// reports the median time from exec to the ready line on stdout: for a
// data dir that exists (every start but the first) and for a fresh one.
func measureStartup(runs int) error {
	dir, err := os.MkdirTemp("", "companion-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	comp := filepath.Join(dir, "companion")
	bare := filepath.Join(dir, "bare")
	for bin, pkg := range map[string]string{comp: "github.com/canvasapp/companion/cmd/companion", bare: "github.com/canvasapp/companion/internal/benchrun/bare"} {
		out, err := exec.Command("go", "build", "-o", bin, pkg).CombinedOutput()
		if err != nil {
			return fmt.Errorf("build %s: %v\n%s", pkg, err, out)
		}
	}
	// The usual start reuses the data dir; the very first one also
	// creates and migrates the database. Both are measured.
	existing := filepath.Join(dir, "data")
	if _, err := timeToReady(comp, "desktop", "--data-dir", existing, "--docker-scope", "bench"); err != nil {
		return fmt.Errorf("companion: %w", err)
	}
	var tc, tf, tb []time.Duration
	for i := 0; i < runs; i++ {
		d, err := timeToReady(comp, "desktop", "--data-dir", existing, "--docker-scope", "bench")
		if err != nil {
			return fmt.Errorf("companion: %w", err)
		}
		tc = append(tc, d)
		d, err = timeToReady(comp, "desktop", "--data-dir", filepath.Join(dir, fmt.Sprintf("fresh-%d", i)), "--docker-scope", "bench")
		if err != nil {
			return fmt.Errorf("companion: %w", err)
		}
		tf = append(tf, d)
		d, err = timeToReady(bare)
		if err != nil {
			return fmt.Errorf("bare server: %w", err)
		}
		tb = append(tb, d)
	}
	c, f, b := ms(median(tc)), ms(median(tf)), ms(median(tb))
	const baseline = "startup.bare_go_http_server_to_ready_median"
	emit(figure{
		Name: "startup.desktop_to_ready_median", Value: c, Unit: "ms",
		Baseline: baseline, BaselineValue: b, Ratio: c / b,
		Goal: "ratio <= 5 and value < 150 ms", Met: met(c/b <= 5 && c < 150),
	})
	emit(figure{
		Name: "startup.desktop_first_start_to_ready_median", Value: f, Unit: "ms",
		Baseline: baseline, BaselineValue: b, Ratio: f / b,
		Goal: "ratio <= 5 and value < 150 ms (includes creating the database)", Met: met(f/b <= 5 && f < 150),
	})
	emit(figure{Name: baseline, Value: b, Unit: "ms"})
	return nil
}

// timeToReady starts bin and returns how long its first stdout line took.
// The process is killed afterwards.
func timeToReady(bin string, args ...string) (time.Duration, error) {
	cmd := exec.Command(bin, args...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return 0, err
	}
	stdin, err := cmd.StdinPipe() // kept open: desktop exits when it closes
	if err != nil {
		return 0, err
	}
	defer stdin.Close()
	began := time.Now()
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	line, err := bufio.NewReader(out).ReadString('\n')
	took := time.Since(began)
	if err != nil {
		return 0, fmt.Errorf("no ready line: %v", err)
	}
	if len(line) < 10 {
		return 0, fmt.Errorf("odd ready line %q", line)
	}
	return took, nil
}

func median(ds []time.Duration) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
