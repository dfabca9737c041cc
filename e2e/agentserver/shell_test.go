package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

type bashOut struct {
	Kind      string  `json:"kind"`
	ID        string  `json:"id"`
	CommandID string  `json:"command_id"`
	Order     int     `json:"order"`
	ExitCode  *int    `json:"exit_code"`
	Stdout    *string `json:"stdout"`
	Stderr    *string `json:"stderr"`
}

func (o bashOut) out() string {
	if o.Stdout == nil {
		return ""
	}
	return *o.Stdout
}

func (o bashOut) err() string {
	if o.Stderr == nil {
		return ""
	}
	return *o.Stderr
}

func (o bashOut) code() int {
	if o.ExitCode == nil {
		return -999
	}
	return *o.ExitCode
}

// bash runs a command through execute_bash_command.
func (e *env) bash(body map[string]any) bashOut {
	e.t.Helper()
	var out bashOut
	if code, raw := e.do("POST", "/api/bash/execute_bash_command", body, &out); code != 200 {
		e.t.Fatalf("execute_bash_command %v: %d %s", body, code, raw)
	}
	return out
}

func TestBashExecutes(t *testing.T) {
	e := newEnv(t, Config{Keys: []string{testKey}})
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a.txt"), "a")
	writeFile(t, filepath.Join(dir, "b.txt"), "b")
	writeFile(t, filepath.Join(dir, "c.md"), "c")
	os.MkdirAll(filepath.Join(dir, "sub", "deep"), 0o755)

	if o := e.bash(map[string]any{"command": "echo hi"}); o.out() != "hi\n" || o.code() != 0 || o.Stderr != nil ||
		o.Kind != "BashOutput" || o.Order != 0 || o.CommandID == "" {
		t.Errorf("echo: %+v", o)
	}
	// printf writes NUL bytes and any byte; output is decoded as UTF-8.
	if o := e.bash(map[string]any{"command": `printf 'a\000b\303\251'`}); o.out() != "a\x00bé" {
		t.Errorf("printf with NUL: %q", o.out())
	}
	// A character split between two writes (two reads upstream) becomes
	// replacement characters; an ill-formed sequence is one.
	if o := e.bash(map[string]any{"command": `printf '\303'; printf '\251'; printf '\342\202x'`}); o.out() != "\ufffd\ufffd\ufffdx" {
		t.Errorf("split character: %q", o.out())
	}
	// Globbing happens in cwd; so do redirections and rm.
	if o := e.bash(map[string]any{"command": "echo *.txt; echo s*/", "cwd": dir}); o.out() != "a.txt b.txt\nsub/\n" {
		t.Errorf("glob in cwd: %q %q", o.out(), o.err())
	}
	if o := e.bash(map[string]any{"command": "printf new > made.txt && rm a.txt && rm -r sub && pwd", "cwd": dir}); o.code() != 0 || o.out() != dir+"\n" {
		t.Errorf("redirect, rm, pwd: %+v %q %q", o, o.out(), o.err())
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "made.txt")); string(b) != "new" {
		t.Errorf("made.txt = %q", b)
	}
	for _, gone := range []string{"a.txt", "sub"} {
		if _, err := os.Lstat(filepath.Join(dir, gone)); err == nil {
			t.Errorf("%s not removed", gone)
		}
	}
	if o := e.bash(map[string]any{"command": "rm nothere", "cwd": dir}); o.code() != 1 ||
		o.err() != "rm: cannot remove 'nothere': No such file or directory\n" {
		t.Errorf("rm of a missing file: %d %q", o.code(), o.err())
	}
	// chmod, then test sees the mode.
	if o := e.bash(map[string]any{"command": "chmod +x b.txt && [ -x b.txt ] && chmod 600 c.md && echo ok", "cwd": dir}); o.out() != "ok\n" {
		t.Errorf("chmod: %q %q", o.out(), o.err())
	}
	if fi, _ := os.Stat(filepath.Join(dir, "c.md")); fi.Mode().Perm() != 0o600 {
		t.Errorf("c.md mode %o", fi.Mode().Perm())
	}
	// Builtins, loops, exit status.
	if o := e.bash(map[string]any{"command": "for i in 1 2 3; do printf '%s,' $i; done; test -d /; exit 3"}); o.out() != "1,2,3," || o.code() != 3 {
		t.Errorf("loop and exit: %q %d", o.out(), o.code())
	}
	// Any other program is not found, as in a box without it.
	if o := e.bash(map[string]any{"command": "echo before\nls -la"}); o.code() != 127 || o.out() != "before\n" ||
		o.err() != "/bin/sh: 2: ls: not found\n" {
		t.Errorf("unknown command: %d %q %q", o.code(), o.out(), o.err())
	}
	if o := e.bash(map[string]any{"command": "echo 'unclosed"}); o.code() != 2 || !strings.HasPrefix(o.err(), "/bin/sh: 1: Syntax error: ") {
		t.Errorf("syntax error: %d %q", o.code(), o.err())
	}
	// A missing cwd: the shell never starts.
	missing := filepath.Join(dir, "nope")
	if o := e.bash(map[string]any{"command": "echo x", "cwd": missing}); o.code() != -1 || o.Stdout != nil ||
		o.err() != "Error executing command: [Errno 2] No such file or directory: '"+missing+"'" {
		t.Errorf("missing cwd: %+v %q", o, o.err())
	}
	// The default cwd is the server's.
	wd, _ := os.Getwd()
	if o := e.bash(map[string]any{"command": "pwd"}); o.out() != wd+"\n" {
		t.Errorf("default cwd: %q, want %q", o.out(), wd)
	}
	// The session key is not in the shell's environment; AI_AGENT is.
	t.Setenv("SESSION_API_KEY", "do-not-leak")
	if o := e.bash(map[string]any{"command": `printf '%s|%s' "$SESSION_API_KEY" "$AI_AGENT"`}); o.out() != "|openhands" {
		t.Errorf("environment: %q", o.out())
	}
}

func TestBashTimeout(t *testing.T) {
	e := newEnv(t, Config{})
	start := time.Now()
	o := e.bash(map[string]any{"command": "echo started; while :; do :; done", "timeout": 1})
	if o.code() != -1 || o.out() != "started\n" {
		t.Errorf("timeout: %d %q", o.code(), o.out())
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("a 1 s timeout took %v", d)
	}
}

// TestBashChunks: output past 1,048,576 characters comes in chunks; the
// route answers the last one, which alone has the exit code.
func TestBashChunks(t *testing.T) {
	e := newEnv(t, Config{})
	// 1,100,000 characters of "é" (2 bytes each).
	cmd := `s=éééééééééé; s=$s$s$s$s$s$s$s$s$s$s; s=$s$s$s$s$s$s$s$s$s$s; ` +
		`i=0; while [ $i -lt 1100 ]; do printf %s $s; i=$((i+1)); done`
	o := e.bash(map[string]any{"command": cmd})
	if o.code() != 0 || o.Order != 1 || len([]rune(o.out())) != 1_100_000-bashChunkChars {
		t.Errorf("chunked output: order %d exit %d, %d characters", o.Order, o.code(), len([]rune(o.out())))
	}

	// The page rule, on the collector: with more than 100 chunks, execute
	// answers the 100th (upstream looks the command's outputs up one page
	// of 100 at a time and takes the page's last).
	out := &bashOutput{commandID: newUUID(), now: time.Now}
	w := out.writer(false)
	chunk := strings.Repeat("a", bashChunkChars)
	for range 101 {
		io.WriteString(w, chunk)
	}
	io.WriteString(w, "tail")
	ev := out.finish(0)
	if ev["order"] != 99 || ev["exit_code"] != (*int)(nil) || len(*ev["stdout"].(*string)) != bashChunkChars {
		t.Errorf("101 chunks and a tail: answered order %v exit %v", ev["order"], ev["exit_code"])
	}
	small := &bashOutput{commandID: newUUID(), now: time.Now}
	io.WriteString(small.writer(true), strings.Repeat("b", bashChunkChars))
	if ev := small.finish(5); ev["order"] != 0 || *ev["exit_code"].(*int) != 5 || *ev["stderr"].(*string) != strings.Repeat("b", bashChunkChars) {
		t.Errorf("exactly one chunk's worth stays in the final event: %v", ev["order"])
	}
}

func TestBashStartRunsInBackground(t *testing.T) {
	e := newEnv(t, Config{})
	dir := t.TempDir()
	e.clock.Advance(time.Minute)
	var cmd struct {
		Kind    string  `json:"kind"`
		Command string  `json:"command"`
		Cwd     *string `json:"cwd"`
		Timeout int     `json:"timeout"`
	}
	if code, raw := e.do("POST", "/api/bash/start_bash_command", map[string]any{"command": "printf done > f", "cwd": dir}, &cmd); code != 200 ||
		cmd.Kind != "BashCommand" || cmd.Timeout != 300 || cmd.Cwd == nil || *cmd.Cwd != dir {
		t.Fatalf("start: %d %s", code, raw)
	}
	if e.idle() != 0 {
		t.Error("start_bash_command did not move the idle clock")
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		if b, _ := os.ReadFile(filepath.Join(dir, "f")); string(b) == "done" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the background command did not run")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestBashValidation(t *testing.T) {
	e := newEnv(t, Config{})
	for _, c := range []struct {
		body any
		want string
	}{
		{map[string]any{"cwd": "/"}, `"loc":["body","command"],"msg":"Field required","type":"missing"`},
		{map[string]any{"command": 5}, `"input":5,"loc":["body","command"],"msg":"Input should be a valid string","type":"string_type"`},
		{map[string]any{"command": "x", "timeout": 1.5}, `"type":"int_from_float"`},
		{map[string]any{"command": "x", "timeout": "soon"}, `"type":"int_parsing"`},
		{map[string]any{"command": "x", "cwd": 3}, `"loc":["body","cwd"]`},
		{[]string{"echo"}, `"type":"model_attributes_type"`},
	} {
		code, raw := e.do("POST", "/api/bash/execute_bash_command", c.body, nil)
		if code != 422 || !strings.Contains(string(raw), c.want) {
			t.Errorf("%v: %d %s, want 422 with %s", c.body, code, raw, c.want)
		}
	}
	if o := e.bash(map[string]any{"command": "echo $((1+1))", "timeout": "7"}); o.out() != "2\n" {
		t.Errorf("a numeric string timeout is accepted: %q", o.out())
	}
	code, raw := e.do("POST", "/api/bash/execute_bash_command", nil, nil)
	if code != 422 || !strings.Contains(string(raw), `"loc":["body"],"msg":"Field required"`) {
		t.Errorf("no body: %d %s", code, raw)
	}
}

func TestChmod(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "f")
	d := filepath.Join(dir, "d")
	writeFile(t, f, "x")
	os.MkdirAll(filepath.Join(d, "in"), 0o755)
	writeFile(t, filepath.Join(d, "in", "g"), "y")
	os.Symlink(f, filepath.Join(d, "link"))
	id := func(p string) (string, error) {
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		return p, nil
	}
	mode := func(p string) os.FileMode {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Mode() & (os.ModePerm | os.ModeSetuid | os.ModeSetgid | os.ModeSticky)
	}
	mask := umask()
	steps := []struct {
		args []string
		path string
		want os.FileMode
	}{
		{[]string{"644", "f"}, f, 0o644},
		{[]string{"+x", "f"}, f, 0o755&^mask | 0o644},
		{[]string{"644", "f"}, f, 0o644},
		{[]string{"a+x", "f"}, f, 0o755},
		{[]string{"u+x,g-w,o-rx", "f"}, f, 0o750},
		{[]string{"go=r", "f"}, f, 0o744},
		{[]string{"g=u", "f"}, f, 0o774},
		{[]string{"-w", "f"}, f, (0o774 &^ (0o222 &^ mask))},
		{[]string{"0600", "f"}, f, 0o600},
		{[]string{"u+s", "f"}, f, 0o600 | os.ModeSetuid},
		{[]string{"4755", "f"}, f, 0o755 | os.ModeSetuid},
		{[]string{"a-x,+X", "f"}, f, 0o644 | os.ModeSetuid},
		{[]string{"+t", "d"}, d, 0o755 | os.ModeSticky},
	}
	for _, s := range steps {
		var errb strings.Builder
		if code := chmod(s.args, &errb, id); code != 0 {
			t.Fatalf("chmod %v: exit %d %s", s.args, code, errb.String())
		}
		if got := mode(s.path); got != s.want {
			t.Errorf("chmod %v: mode %v, want %v", s.args, got, s.want)
		}
	}
	// -R changes the tree but not through symlinks.
	os.Chmod(f, 0o644)
	var errb strings.Builder
	if code := chmod([]string{"-R", "go-rwx", "d"}, &errb, id); code != 0 {
		t.Fatalf("chmod -R: %d %s", code, errb.String())
	}
	if mode(filepath.Join(d, "in", "g")) != 0o600 || mode(filepath.Join(d, "in")) != 0o700 || mode(f) != 0o644 {
		t.Errorf("chmod -R: g %v, in %v, link target %v", mode(filepath.Join(d, "in", "g")), mode(filepath.Join(d, "in")), mode(f))
	}
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"u+q", "f"}, "chmod: invalid mode: 'u+q'\n"},
		{[]string{"8", "f"}, "chmod: invalid mode: '8'\n"},
		{[]string{"644", "missing"}, "chmod: cannot access 'missing': No such file or directory\n"},
		{[]string{"644"}, "chmod: missing operand after '644'\n"},
		{nil, "chmod: missing operand\n"},
	} {
		var errb strings.Builder
		if code := chmod(c.args, &errb, id); code != 1 || !strings.HasPrefix(errb.String(), c.msg) {
			t.Errorf("chmod %v: exit %d %q, want 1 %q", c.args, code, errb.String(), c.msg)
		}
	}
}

func TestRmRefusals(t *testing.T) {
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"-rf", "."}, "rm: refusing to remove '.' or '..' directory: skipping '.'\n"},
		{[]string{"-r", "a/.."}, "rm: refusing to remove '.' or '..' directory: skipping 'a/..'\n"},
		{[]string{"-rf", "/"}, "rm: it is dangerous to operate recursively on '/'\n"},
		{nil, "rm: missing operand\n"},
	} {
		var errb strings.Builder
		called := false
		code := rmFiles(c.args, &errb, func(p string) (string, error) { called = true; return p, nil })
		if code != 1 || !strings.HasPrefix(errb.String(), c.msg) || called {
			t.Errorf("rm %v: exit %d %q (resolved: %v)", c.args, code, errb.String(), called)
		}
	}
	if code := rmFiles([]string{"-f"}, io.Discard, nil); code != 0 {
		t.Errorf("rm -f without operands: exit %d", code)
	}
}
