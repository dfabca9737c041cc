package e2e

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// processMarker returns an environment entry unique to the test: every
// process started with it (and its descendants, which inherit it) can be
// found in /proc afterwards.
func processMarker(t *testing.T) string {
	t.Helper()
	var b [8]byte
	rand.Read(b[:])
	return "COMPANION_E2E_PROCESS_MARK=" + hex.EncodeToString(b[:])
}

// markedProcesses lists the live processes whose environment holds marker,
// as "pid name" strings (zombies have no environment and are not listed).
func markedProcesses(marker string) []string {
	var found []string
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, dir := range dirs {
		env, err := os.ReadFile(filepath.Join(dir, "environ"))
		if err != nil || !bytes.Contains(env, []byte(marker+"\x00")) {
			continue
		}
		comm, _ := os.ReadFile(filepath.Join(dir, "comm"))
		found = append(found, filepath.Base(dir)+" "+strings.TrimSpace(string(comm)))
	}
	return found
}

// waitNoneMarked waits until no process carries marker; it fails the test
// naming what is left.
func waitNoneMarked(t *testing.T, marker string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		left := markedProcesses(marker)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes left running: %v", left)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// killMarked kills whatever process still carries marker.
func killMarked(marker string) {
	for _, p := range markedProcesses(marker) {
		if pid, err := strconv.Atoi(strings.Fields(p)[0]); err == nil {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// withoutEnv is os.Environ() without the variables named.
func withoutEnv(names ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		keep := true
		for _, n := range names {
			if strings.HasPrefix(kv, n+"=") {
				keep = false
			}
		}
		if keep {
			env = append(env, kv)
		}
	}
	return env
}

// TestMakeRunStopsOnSIGTERM runs `make run` as a person does, in a session
// of its own (setsid make run &) with no D-Bus session, so that
// with-keyring.sh starts a keyring session for it, and with companion
// flags passed through ARGS (--listen on a port of the test's choosing).
// SIGTERM to make alone must close the stream with 1001 and leave no
// process behind: not companion, not with-keyring.sh, not the bus or the
// keyring daemon it started.
func TestMakeRunStopsOnSIGTERM(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Fatalf("make is needed: %v", err)
	}
	dir := t.TempDir()
	port := freePort(t)
	marker := processMarker(t)
	cmd := exec.Command("make", "-C", "..", "run",
		"RUN_BIN="+companionBin, "BOX_IMAGE="+boxImage(t), "DATA_DIR="+filepath.Join(dir, "data"),
		"ARGS=--docker-scope "+dockerScope(t)+" --listen 127.0.0.1:"+port+" --log-format json")
	cmd.Env = append(withoutEnv("DBUS_SESSION_BUS_ADDRESS", "MAKEFLAGS", "MAKELEVEL"),
		marker, "COMPANION_KEYRING_HOME="+filepath.Join(dir, "keyring"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		killMarked(marker) // so that a failure does not leak
		if t.Failed() {
			t.Logf("make stderr:\n%s", stderr.String())
		}
	})

	// make echoes its recipe on stdout too; the ready line is the JSON one.
	var rl ready
	lines := bufio.NewScanner(stdout)
	for rl.Event != "ready" {
		if !lines.Scan() {
			t.Fatalf("make run printed no ready line")
		}
		if strings.HasPrefix(lines.Text(), "{") {
			if err := json.Unmarshal(lines.Bytes(), &rl); err != nil {
				t.Fatalf("ready line %q: %v", lines.Text(), err)
			}
		}
	}
	go io.Copy(io.Discard, stdout)
	if want := "http://127.0.0.1:" + port; rl.URL != want {
		t.Fatalf("ready url %s, want %s (ARGS' --listen)", rl.URL, want)
	}
	if got := markedProcesses(marker); !hasProcess(got, "dbus-daemon") || !hasProcess(got, "gnome-keyring-d") {
		t.Fatalf("make run started no keyring session of its own (want a dbus-daemon and a gnome-keyring-daemon): %v", got)
	}
	p := &proc{t: t, ready: rl}
	s := p.dial(-1)
	if m := s.next(30 * time.Second); m.Type != "snapshot" {
		t.Fatalf("first message %q, want snapshot", m.Type)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := s.closeCode(20 * time.Second); code != websocket.CloseGoingAway {
		t.Fatalf("close code after SIGTERM to make = %d, want 1001", code)
	}
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("make did not exit after SIGTERM")
	}
	waitNoneMarked(t, marker, 20*time.Second)
	if !strings.Contains(stderr.String(), "shutting down") {
		t.Fatalf("companion did not shut down by itself (no \"shutting down\" in its log)")
	}
}

func hasProcess(list []string, name string) bool {
	for _, p := range list {
		if strings.HasSuffix(p, " "+name) {
			return true
		}
	}
	return false
}

// TestSecondCompanionSaysWhoHoldsTheDataDir: a second companion on a data
// dir in use says at once, while it waits, which pid holds it.
func TestSecondCompanionSaysWhoHoldsTheDataDir(t *testing.T) {
	dir := t.TempDir()
	first := start(t, options{dataDir: dir, args: []string{"--docker-scope", "unused"}})
	second := exec.Command(companionBin, "desktop", "--data-dir", dir, "--docker-scope", "unused", "--log-format", "json")
	stdin, err := second.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	errPipe, err := second.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := second.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	logLines := make(chan string, 64)
	go func() {
		defer close(exited)
		sc := bufio.NewScanner(errPipe)
		for sc.Scan() {
			select {
			case logLines <- sc.Text():
			default:
			}
		}
		second.Wait()
	}()
	defer second.Process.Kill()
	wantPid := `"pid":"` + strconv.Itoa(first.cmd.Process.Pid) + `"`
	for {
		select {
		case l := <-logLines:
			if strings.Contains(l, "waiting for it to stop") {
				if !strings.Contains(l, wantPid) {
					t.Fatalf("the waiting line does not name the holder (%s): %s", wantPid, l)
				}
				select {
				case <-exited:
					t.Fatal("the second companion said it waits only once it had stopped")
				default:
				}
				return
			}
		case <-exited:
			t.Fatal("the second companion stopped without saying who holds the data dir and that it waits")
		}
	}
}

// TestReplaceBinKeepsARunningBinary: `make build` moves its output into
// place with scripts/replace-bin.sh, which leaves a binary that a process
// is running as it is (and says so), and replaces it once nothing runs it.
func TestReplaceBinKeepsARunningBinary(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "companion")
	orig, err := os.ReadFile(companionBin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(target, orig, 0o755); err != nil {
		t.Fatal(err)
	}
	newBuild := []byte("#!/bin/sh\necho a newer build\n")
	replace := func() string {
		t.Helper()
		if err := os.WriteFile(target+".new", newBuild, 0o755); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command("../scripts/replace-bin.sh", target+".new", target).CombinedOutput()
		if err != nil {
			t.Fatalf("replace-bin.sh: %v\n%s", err, out)
		}
		return string(out)
	}

	running := exec.Command(target, "desktop", "--data-dir", filepath.Join(dir, "data"), "--docker-scope", "unused")
	stdin, err := running.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := running.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := running.Start(); err != nil {
		t.Fatal(err)
	}
	defer running.Process.Kill()
	if !bufio.NewScanner(out).Scan() {
		t.Fatal("the copied binary printed no ready line")
	}
	msg := replace()
	if !strings.Contains(msg, "is running (pid "+strconv.Itoa(running.Process.Pid)+")") {
		t.Fatalf("replace-bin.sh did not say the binary is running and by which pid: %q", msg)
	}
	if got, _ := os.ReadFile(target); !bytes.Equal(got, orig) {
		t.Fatal("the running binary was replaced")
	}

	stdin.Close()
	running.Wait()
	replace()
	if got, _ := os.ReadFile(target); !bytes.Equal(got, newBuild) {
		t.Fatal("the binary was not replaced once nothing ran it")
	}
	if _, err := os.Stat(target + ".new"); !os.IsNotExist(err) {
		t.Fatalf("the new build is still beside the binary: %v", err)
	}
}
