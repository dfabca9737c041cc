package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
)

// result is one benchmark line: its name (without the -GOMAXPROCS suffix)
// and every "value unit" pair on it.
type result struct {
	name    string
	metrics map[string]float64
}

var benchLine = regexp.MustCompile(`^(Benchmark\S+?)(-\d+)?\s+\d+\s+(.*)$`)

// goBench runs `go test -bench` on one package and returns its results.
func goBench(pkg, pattern, benchtime string) (map[string]result, error) {
	args := []string{"test", "-run", "^$", "-bench", pattern, "-benchmem", "-count", "1", "-timeout", "20m"}
	if benchtime != "" {
		args = append(args, "-benchtime", benchtime)
	}
	args = append(args, pkg)
	cmd := exec.Command("go", args...)
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, out.String())
	}
	res := map[string]result{}
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		m := benchLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		r := result{name: m[1], metrics: map[string]float64{}}
		f := strings.Fields(m[3])
		for i := 0; i+1 < len(f); i += 2 {
			if v, err := strconv.ParseFloat(f[i], 64); err == nil {
				r.metrics[f[i+1]] = v
			}
		}
		res[r.name] = r
	}
	return res, nil
}

// metric returns one metric of one benchmark or an error naming both.
func metric(res map[string]result, bench, unit string) (float64, error) {
	r, ok := res[bench]
	if !ok {
		return 0, fmt.Errorf("benchmark %s did not run", bench)
	}
	v, ok := r.metrics[unit]
	if !ok {
		return 0, fmt.Errorf("benchmark %s reported no %q", bench, unit)
	}
	return v, nil
}
