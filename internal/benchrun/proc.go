package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// bins are the executables the process-level groups run, built once per
// `make bench` into a temporary directory, all of them as `make dist`
// builds the binaries Canvas desktop ships (see distBuildArgs).
type bins struct {
	dir, companion, bare, barehub, wsclient string
}

var (
	builtOnce sync.Once
	built     bins
	buildErr  error
)

func buildBins() (bins, error) {
	builtOnce.Do(func() {
		dir, err := os.MkdirTemp("", "companion-bench-bin-")
		if err != nil {
			buildErr = err
			return
		}
		built = bins{dir: dir, companion: filepath.Join(dir, "companion"), bare: filepath.Join(dir, "bare"),
			barehub: filepath.Join(dir, "barehub"), wsclient: filepath.Join(dir, "wsclient")}
		const p = "github.com/canvasapp/companion/"
		for bin, pkg := range map[string]string{built.companion: p + "cmd/companion", built.bare: p + "internal/benchrun/bare",
			built.barehub: p + "internal/benchrun/barehub", built.wsclient: p + "internal/benchrun/wsclient"} {
			cmd := exec.Command("go", append(distBuildArgs(), "-o", bin, pkg)...)
			cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
			out, err := cmd.CombinedOutput()
			if err != nil {
				buildErr = fmt.Errorf("build %s: %v\n%s", pkg, err, out)
				return
			}
		}
	})
	return built, buildErr
}

// distBuildArgs are `go build`'s flags in the Makefile's dist target, run
// with CGO_ENABLED=0 as there. Companion and its baselines are built the
// same way, and the way people get companion: a plain `go build` links a
// net/http program against libc (cgo's resolver) and runs the dynamic
// loader first, about 0.8 ms of the bare server's 3 ms start that no
// shipped binary pays.
func distBuildArgs() []string {
	return []string{"build", "-trimpath", "-ldflags", "-s -w"}
}

// server is a running companion desktop (or bare hub) and its ready line.
type server struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	URL   string `json:"url"`
	Token string `json:"token"`
}

// startServer starts bin and waits for its ready line. Its stderr (the
// log) is discarded unless the bench fails.
func startServer(bin string, args ...string) (*server, error) {
	return startServerEnv(nil, bin, args...)
}

// startServerEnv is startServer with env added to the environment.
func startServerEnv(env []string, bin string, args ...string) (*server, error) {
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	var logs bytes.Buffer
	cmd.Stderr = &logs
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &server{cmd: cmd, stdin: stdin}
	line, err := bufio.NewReader(out).ReadBytes('\n')
	if err == nil {
		err = json.Unmarshal(line, s)
	}
	if err != nil || s.URL == "" {
		s.stop()
		return nil, fmt.Errorf("%s: no ready line (%v); log:\n%s", filepath.Base(bin), err, logs.String())
	}
	return s, nil
}

func (s *server) pid() int { return s.cmd.Process.Pid }

// stop closes stdin (desktop and the hub exit on that, finishing their
// writes) and kills the process if it has not exited within 20 s.
func (s *server) stop() {
	s.stdin.Close()
	done := make(chan struct{})
	go func() { s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		s.cmd.Process.Kill()
		<-done
	}
}

// waitQuiet waits until the process has used no CPU for a whole second
// (its background work after the ready line is done: state loaded, Wasm
// modules compiled and cached), at most limit.
func waitQuiet(pid int, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	last, err := procCPUTicks(pid)
	if err != nil {
		return err
	}
	for time.Now().Before(deadline) {
		time.Sleep(time.Second) // sampling interval of the CPU counter
		now, err := procCPUTicks(pid)
		if err != nil {
			return err
		}
		if now-last <= 1 {
			return nil
		}
		last = now
	}
	return fmt.Errorf("process %d still busy after %s", pid, limit)
}

// procCPUTicks is a process's user+system CPU time in clock ticks.
func procCPUTicks(pid int) (int64, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	f := strings.Fields(string(raw[bytes.LastIndexByte(raw, ')')+1:]))
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return u + s, nil
}

// raiseNoFile lifts the soft open-file limit to the hard one; the servers
// and the client process inherit it (1,000 clients need 2,000+ sockets).
func raiseNoFile() {
	var l syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l) == nil && l.Cur < l.Max {
		l.Cur = l.Max
		syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l)
	}
}
