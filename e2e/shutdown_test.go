package e2e

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// closeCodeAfter waits for the stream to end and returns its close code.
func (s *stream) closeCode(timeout time.Duration) int {
	s.t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case _, ok := <-s.msgs:
			if !ok {
				var ce *websocket.CloseError
				if errors.As(<-s.errc, &ce) {
					return ce.Code
				}
				return -1
			}
		case <-deadline:
			s.t.Fatalf("stream still open %v after shutdown began", timeout)
		}
	}
}

// TestSIGTERMClosesStreamsWithGoingAway: a client connected when companion
// gets SIGTERM receives close code 1001 (going away), not a dropped
// connection (1006), and companion exits 0.
func TestSIGTERMClosesStreamsWithGoingAway(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			p := start(t, options{dataDir: t.TempDir(), args: []string{"--docker-scope", "unused"}})
			s := p.dial(-1)
			if m := s.next(10 * time.Second); m.Type != "snapshot" {
				t.Fatalf("first message %q, want snapshot", m.Type)
			}
			p.cmd.Process.Signal(sig)
			if code := s.closeCode(15 * time.Second); code != websocket.CloseGoingAway {
				t.Fatalf("close code after %v = %d, want 1001\n%s", sig, code, p.stderr.String())
			}
			select {
			case <-p.done:
				if p.exit != nil {
					t.Fatalf("exit after %v: %v", sig, p.exit)
				}
			case <-time.After(20 * time.Second):
				t.Fatalf("no exit after %v", sig)
			}
		})
	}
}

// TestWithKeyringPassesLogsAndSignals runs companion the way `make run`
// does, under scripts/with-keyring.sh in a private keyring session: its
// log lines must arrive on stderr while it runs (no filter holding them
// back), and SIGTERM, sent to the script alone or to the whole process
// group as a terminal or make does, must reach companion, close the
// stream with 1001, and end the script with status 0 and no shell noise.
func TestWithKeyringPassesLogsAndSignals(t *testing.T) {
	for _, group := range []bool{false, true} {
		name := "script"
		if group {
			name = "process-group"
		}
		t.Run(name, func(t *testing.T) {
			cmd := exec.Command("../scripts/with-keyring.sh", "--private", companionBin, "desktop",
				"--data-dir", t.TempDir(), "--docker-scope", "unused", "--exit-on-stdin-close=false")
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			stderrPipe, err := cmd.StderrPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			stderr := &syncBuffer{}
			logLines := make(chan string, 256)
			readErr := make(chan struct{})
			go func() {
				defer close(readErr)
				sc := bufio.NewScanner(stderrPipe)
				for sc.Scan() {
					stderr.Write([]byte(sc.Text() + "\n"))
					select {
					case logLines <- sc.Text():
					default:
					}
				}
			}()
			t.Cleanup(func() {
				syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
				if t.Failed() {
					t.Logf("stderr:\n%s", stderr.String())
				}
			})

			var rl ready
			sc := bufio.NewScanner(stdout)
			if !sc.Scan() || json.Unmarshal(sc.Bytes(), &rl) != nil || rl.Event != "ready" {
				t.Fatalf("no ready line on stdout: %q", sc.Text())
			}
			go io.Copy(io.Discard, stdout)
			// The log line written just before the ready line is on stderr
			// now, while companion runs.
			waitLine(t, logLines, "companion ready", 10*time.Second)

			p := &proc{t: t, ready: rl}
			s := p.dial(-1)
			if m := s.next(10 * time.Second); m.Type != "snapshot" {
				t.Fatalf("first message %q", m.Type)
			}
			go func() { <-readErr; done <- cmd.Wait() }()
			if group {
				syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
			} else {
				cmd.Process.Signal(syscall.SIGTERM)
			}
			if code := s.closeCode(15 * time.Second); code != websocket.CloseGoingAway {
				t.Fatalf("close code = %d, want 1001", code)
			}
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("with-keyring.sh exited with %v", err)
				}
			case <-time.After(20 * time.Second):
				t.Fatal("with-keyring.sh did not exit after SIGTERM")
			}
			out := stderr.String()
			if strings.Contains(out, "No child processes") || strings.Contains(out, "Failed to set fd limit") {
				t.Fatalf("shell or bus noise on stderr:\n%s", out)
			}
			// The last line companion logs on the way out arrived whole.
			if !strings.Contains(out, "shutting down") {
				t.Fatalf("shutdown log lines were lost:\n%s", out)
			}
		})
	}
}

func waitLine(t *testing.T, lines <-chan string, want string, timeout time.Duration) {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case l := <-lines:
			if strings.Contains(l, want) {
				return
			}
		case <-deadline:
			t.Fatalf("no stderr line containing %q within %v", want, timeout)
		}
	}
}
