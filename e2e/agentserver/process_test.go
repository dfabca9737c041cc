package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// These tests run the built program, to check what only a real process
// shows: signal handling and the default conversations path.

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// buildBinary builds the emulator once per test run.
func buildBinary(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("go toolchain not on PATH")
	}
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "agentserver-test-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "agentserver")
		cmd := exec.Command("go", "build", "-o", binPath, ".")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binPath != "" {
		os.RemoveAll(filepath.Dir(binPath))
	}
	os.Exit(code)
}

type proc struct {
	cmd     *exec.Cmd
	url     string
	done    chan error
	holding chan struct{} // closed when it logs that it holds on after a signal
}

var listenRE = regexp.MustCompile(`addr=(\S+)`)

func start(t *testing.T, bin, dir string, env ...string) *proc {
	t.Helper()
	cmd := exec.Command(bin)
	cmd.Dir = dir
	cmd.Env = append([]string{"EMULATOR_LISTEN=127.0.0.1:0"}, env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, done: make(chan error, 1), holding: make(chan struct{})}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			t.Log(line)
			if m := listenRE.FindStringSubmatch(line); m != nil && strings.Contains(line, "listening") {
				addr <- m[1]
			}
			if strings.Contains(line, "signal received; holding on") {
				close(p.holding)
			}
		}
		p.done <- cmd.Wait()
	}()
	t.Cleanup(func() { cmd.Process.Kill() })
	select {
	case a := <-addr:
		p.url = "http://" + a
	case err := <-p.done:
		t.Fatalf("emulator exited before listening: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("emulator did not start listening")
	}
	return p
}

func (p *proc) wait(t *testing.T) {
	t.Helper()
	select {
	case err := <-p.done:
		if err != nil {
			t.Fatalf("emulator exit: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("emulator did not exit after SIGTERM")
	}
}

func TestProcessSignals(t *testing.T) {
	bin := buildBinary(t)

	t.Run("prompt", func(t *testing.T) {
		p := start(t, bin, t.TempDir())
		if resp, err := http.Get(p.url + "/alive"); err != nil || resp.StatusCode != 200 {
			t.Fatalf("alive: %v", err)
		}
		p.cmd.Process.Signal(syscall.SIGTERM)
		p.wait(t)
	})

	t.Run("sockets", func(t *testing.T) {
		// Open sockets are closed with 1012, as uvicorn closes them, and
		// do not hold the exit up.
		p := start(t, bin, t.TempDir())
		ws, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(p.url, "http")+"/sockets/bash-events", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer ws.Close()
		// Its handler runs once a command's event comes back: only then
		// is the socket one the shutdown knows to close.
		if err := ws.WriteJSON(map[string]any{"command": "true"}); err != nil {
			t.Fatal(err)
		}
		ws.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, _, err := ws.ReadMessage(); err != nil {
			t.Fatalf("no bash event on the socket: %v", err)
		}
		ws.SetReadDeadline(time.Time{})
		p.cmd.Process.Signal(syscall.SIGTERM)
		if code, _ := closedWith(t, ws); code != websocket.CloseServiceRestart {
			t.Errorf("socket closed with %d, want 1012", code)
		}
		p.wait(t)
	})

	t.Run("grace", func(t *testing.T) {
		p := start(t, bin, t.TempDir(), "EMULATOR_STOP_GRACE_SECONDS=2")
		p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.holding:
		case <-time.After(20 * time.Second):
			t.Fatal("the emulator never said it received the signal")
		}
		// Still serving after the signal: it holds on for the grace period.
		resp, err := http.Get(p.url + "/alive")
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("not serving during the grace period: %v", err)
		}
		resp.Body.Close()
		p.wait(t)
	})
}

func TestProcessDefaultPath(t *testing.T) {
	bin := buildBinary(t)
	dir := t.TempDir()
	p := start(t, bin, dir, "OH_SESSION_API_KEYS_0=secret-key")
	req, _ := http.NewRequest("POST", p.url+"/api/conversations", strings.NewReader(`{}`))
	req.Header.Set("X-Session-API-Key", "secret-key")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 201 {
		t.Fatalf("create: %v %v", resp, err)
	}
	var c struct{ ID string }
	json.NewDecoder(resp.Body).Decode(&c)
	resp.Body.Close()
	meta := filepath.Join(dir, "workspace", "conversations", strings.ReplaceAll(c.ID, "-", ""), "meta.json")
	if _, err := os.Stat(meta); err != nil {
		t.Fatalf("conversation not under ./workspace/conversations: %v", err)
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	p.wait(t)
}
