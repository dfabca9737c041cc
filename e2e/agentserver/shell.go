package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/interp"
	"mvdan.cc/sh/v3/syntax"
)

// The bash routes (bash_router.py, bash_service.py) run the command for
// real. Upstream hands it to /bin/sh (dash in its Debian-based image)
// with the request's cwd and timeout; the box image is FROM scratch and
// has no shell, so the emulator interprets the command in-process with
// mvdan.cc/sh: POSIX syntax, the interpreter's builtins (echo, printf,
// test, cd, read, loops, ...), and as external commands only rm and chmod
// (done in Go); any other is "not found", status 127, as in a box without
// that program.
//
// Output is handled as upstream handles it: each read of up to 8192 bytes
// (here: each write, cut at 8192 bytes) is decoded as UTF-8 with
// replacement on its own, so a character split between two reads turns
// into replacement characters; a stream's text is cut into BashOutput
// chunks of 1,048,576 characters, the rest going into a final chunk that
// carries the exit code (-1 on timeout). execute_bash_command answers the
// last chunk of the first page of 100 of the command's chunks, as
// upstream's page lookup does.
//
// Under EMULATOR_FS_ROOT the interpreter works in box paths: its cwd is a
// box path, and every file it opens, stats, lists or hands to rm and
// chmod is mapped under the root (/dev/... excepted), so absolute paths
// in commands mean what they mean in the box.

const (
	bashChunkChars = 1024 * 1024 // MAX_CONTENT_CHAR_LENGTH
	bashReadSize   = 8192
	bashPageSize   = 100 // search_bash_events's default limit
)

type bashRequest struct {
	Command string
	Cwd     *string
	Timeout int
}

// readBash validates an ExecuteBashRequest body as pydantic does:
// command a string, cwd a string or null, timeout an integer (default
// 300; integral floats, numeric strings and booleans accepted).
func readBash(w http.ResponseWriter, r *http.Request) (bashRequest, bool) {
	req := bashRequest{Timeout: 300}
	var errs validationErrors
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err == nil && len(bytes.TrimSpace(body)) == 0 {
		errs.add("missing", []any{"body"}, "Field required", nil, nil)
		errs.write(w)
		return req, false
	}
	var raw any
	if err == nil {
		err = json.Unmarshal(body, &raw)
	}
	if err != nil {
		writeJSON(w, http.StatusUnprocessableEntity, validation("json_invalid", []any{"body"}, "JSON decode error: "+err.Error(), nil))
		return req, false
	}
	obj, isObj := raw.(map[string]any)
	if !isObj {
		errs.add("model_attributes_type", []any{"body"}, "Input should be a valid dictionary or object to extract fields from", raw, nil)
		errs.write(w)
		return req, false
	}
	req, fieldErrs := bashFields(obj)
	for _, e := range fieldErrs {
		e["loc"] = append([]any{"body"}, e["loc"].([]any)...)
		errs = append(errs, e)
	}
	if errs.write(w) {
		return req, false
	}
	return req, true
}

// bashFields validates the fields of an ExecuteBashRequest object as
// pydantic does: command a string, cwd a string or null, timeout an
// integer (default 300; integral floats, numeric strings and booleans
// accepted). Locations are relative to the object.
func bashFields(obj map[string]any) (bashRequest, validationErrors) {
	req := bashRequest{Timeout: 300}
	var errs validationErrors
	switch v, ok := obj["command"]; {
	case !ok:
		errs.add("missing", []any{"command"}, "Field required", obj, nil)
	default:
		s, isStr := v.(string)
		if !isStr {
			errs.add("string_type", []any{"command"}, "Input should be a valid string", v, nil)
		}
		req.Command = s
	}
	if v, ok := obj["cwd"]; ok && v != nil {
		s, isStr := v.(string)
		if !isStr {
			errs.add("string_type", []any{"cwd"}, "Input should be a valid string", v, nil)
		}
		req.Cwd = &s
	}
	if v, ok := obj["timeout"]; ok {
		loc := []any{"timeout"}
		switch t := v.(type) {
		case float64:
			if t != math.Trunc(t) {
				errs.add("int_from_float", loc, "Input should be a valid integer, got a number with a fractional part", v, nil)
			}
			req.Timeout = int(t)
		case bool:
			req.Timeout = 0
			if t {
				req.Timeout = 1
			}
		case string:
			n, ok := pydanticInt(t)
			if !ok {
				errs.add("int_parsing", loc, "Input should be a valid integer, unable to parse string as an integer", v, nil)
			}
			req.Timeout = int(n)
		default:
			errs.add("int_type", loc, "Input should be a valid integer", v, nil)
		}
	}
	return req, errs
}

// executeBash is POST /api/bash/execute_bash_command: it runs the command
// and answers when it is done. It moves the idle clock.
func (s *Server) executeBash(w http.ResponseWriter, r *http.Request) {
	req, ok := readBash(w, r)
	if !ok {
		return
	}
	s.touch()
	id := s.recordBashCommand(req)
	writeJSON(w, http.StatusOK, s.runBash(req, id))
}

// startBash is POST /api/bash/start_bash_command: it answers the
// BashCommand and runs the command in the background. It moves the idle
// clock.
func (s *Server) startBash(w http.ResponseWriter, r *http.Request) {
	req, ok := readBash(w, r)
	if !ok {
		return
	}
	s.touch()
	writeJSON(w, http.StatusOK, s.startBashCommand(req))
}

// startBashCommand records the BashCommand and runs it in the background,
// as BashEventService.start_bash_command. It does not move the idle clock:
// the HTTP routes do that themselves and the bash socket does not.
func (s *Server) startBashCommand(req bashRequest) map[string]any {
	id := newUUID()
	cmd := s.bashCommandEvent(req, id)
	s.bash.record(cmd)
	go s.runBash(req, id)
	return cmd
}

// recordBashCommand records a BashCommand event for req and returns its id.
func (s *Server) recordBashCommand(req bashRequest) uuid {
	id := newUUID()
	s.bash.record(s.bashCommandEvent(req, id))
	return id
}

func (s *Server) bashCommandEvent(req bashRequest, id uuid) map[string]any {
	return map[string]any{
		"kind":      "BashCommand",
		"id":        id.dashed(),
		"timestamp": pyTime(s.now()),
		"command":   req.Command,
		"cwd":       req.Cwd,
		"timeout":   req.Timeout,
	}
}

// runBash runs one command and returns the BashOutput execute answers.
// Every BashOutput is recorded as it is made.
func (s *Server) runBash(req bashRequest, id uuid) map[string]any {
	out := &bashOutput{commandID: id, now: s.now, record: s.bash.record}
	cwd, err := s.shellCwd(req.Cwd)
	if err != nil {
		// The shell never started (upstream's "Error executing command").
		ev := out.event(0, intp(-1), nil, strp("Error executing command: "+err.Error()))
		out.emit(ev)
		return ev
	}
	ctx, cancel := bashDeadline(req.Timeout)
	defer cancel()
	code := s.interpret(ctx, req.Command, cwd, out.writer(false), out.writer(true))
	if ctx.Err() != nil {
		code = -1
	}
	return out.finish(code)
}

// bashDeadline is the command's timeout (in seconds; zero or less has
// already expired, as with asyncio.wait_for), or none when it is too far
// off to count.
func bashDeadline(seconds int) (context.Context, context.CancelFunc) {
	if seconds >= math.MaxInt64/int(time.Second) {
		return context.WithCancel(context.Background())
	}
	return context.WithTimeout(context.Background(), time.Duration(seconds)*time.Second)
}

// shellCwd is the box directory the command starts in: the request's cwd
// (relative to the server's own), else the server's working directory. A
// cwd that is missing or not a directory fails as starting a process
// there fails.
func (s *Server) shellCwd(cwd *string) (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	box := s.root.box(wd)
	if s.root.mapped() && !s.root.within(wd) {
		box = "/"
	}
	if cwd != nil {
		if filepath.IsAbs(*cwd) {
			box = *cwd
		} else {
			box = filepath.Join(box, *cwd)
		}
	}
	named := box
	if cwd != nil {
		named = *cwd
	}
	host, err := s.root.host(box)
	if err != nil {
		return "", errors.New(pyOSError(syscall.ENOENT, named))
	}
	fi, err := os.Stat(host)
	switch {
	case err != nil:
		return "", errors.New(pyOSError(err, named))
	case !fi.IsDir():
		return "", errors.New(pyOSError(syscall.ENOTDIR, named))
	}
	return filepath.Clean(box), nil
}

// interpret parses and runs the command with the shell's handlers and
// returns its exit status.
func (s *Server) interpret(ctx context.Context, command, cwd string, stdout, stderr io.Writer) int {
	file, err := syntax.NewParser(syntax.Variant(syntax.LangPOSIX)).Parse(strings.NewReader(command), "")
	if err != nil {
		msg := err.Error()
		var pe syntax.ParseError
		line := 1
		if errors.As(err, &pe) {
			msg, line = pe.Text, int(pe.Pos.Line())
		}
		fmt.Fprintf(stderr, "/bin/sh: %d: Syntax error: %s\n", line, msg)
		return 2
	}
	runner, err := interp.New(
		interp.StdIO(nil, stdout, stderr),
		interp.Env(expand.ListEnviron(shellEnv()...)),
		interp.ExecHandlers(func(interp.ExecHandlerFunc) interp.ExecHandlerFunc { return s.execCommand }),
		interp.OpenHandler(s.shellOpen),
		interp.StatHandler(s.shellStat),
		interp.ReadDirHandler2(s.shellReadDir),
		interp.AccessHandler(s.shellAccess),
	)
	if err != nil {
		fmt.Fprintf(stderr, "/bin/sh: %v\n", err)
		return 2
	}
	// Dir is set directly: the Dir option would stat the box path on the
	// host. The handlers map it.
	runner.Dir = cwd
	err = runner.Run(ctx, file)
	var status interp.ExitStatus
	if errors.As(err, &status) {
		return int(status)
	}
	if err != nil {
		if ctx.Err() == nil {
			fmt.Fprintf(stderr, "/bin/sh: %v\n", err)
		}
		return 2
	}
	return 0
}

// shellEnv is upstream's sanitized_env: the server's environment without
// SESSION_API_KEY, with AI_AGENT=openhands unless set, and the original
// LD_LIBRARY_PATH back when a bundler saved it.
func shellEnv() []string {
	var env []string
	agent := false
	orig, hasOrig := os.LookupEnv("LD_LIBRARY_PATH_ORIG")
	for _, kv := range os.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		switch {
		case k == "SESSION_API_KEY":
			continue
		case k == "AI_AGENT" && strings.TrimSpace(v) == "":
			continue
		case k == "AI_AGENT":
			agent = true
		case k == "LD_LIBRARY_PATH" && hasOrig:
			continue
		}
		env = append(env, kv)
	}
	if !agent {
		env = append(env, "AI_AGENT=openhands")
	}
	if hasOrig && orig != "" {
		env = append(env, "LD_LIBRARY_PATH="+orig)
	}
	return env
}

// boxPath makes a path the interpreter names absolute in box terms.
func boxPath(ctx context.Context, p string) string {
	if !filepath.IsAbs(p) {
		p = filepath.Join(interp.HandlerCtx(ctx).Dir, p)
	}
	return p
}

// mapShell maps a box path for the interpreter; /dev is the host's own.
func (s *Server) mapShell(ctx context.Context, p string, follow bool) (string, error) {
	b := boxPath(ctx, p)
	if b == "/dev" || strings.HasPrefix(b, "/dev/") {
		return b, nil
	}
	if follow {
		return s.root.host(b)
	}
	return s.root.lhost(b)
}

func (s *Server) shellOpen(ctx context.Context, p string, flag int, perm os.FileMode) (io.ReadWriteCloser, error) {
	h, err := s.mapShell(ctx, p, true)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: p, Err: syscall.ENOENT}
	}
	f, err := os.OpenFile(h, flag, perm)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: p, Err: errors.Unwrap(err)}
	}
	return f, nil
}

func (s *Server) shellStat(ctx context.Context, p string, follow bool) (fs.FileInfo, error) {
	h, err := s.mapShell(ctx, p, follow)
	if err != nil {
		return nil, &fs.PathError{Op: "stat", Path: p, Err: syscall.ENOENT}
	}
	if follow {
		return os.Stat(h)
	}
	return os.Lstat(h)
}

func (s *Server) shellReadDir(ctx context.Context, p string) ([]fs.DirEntry, error) {
	h, err := s.mapShell(ctx, p, true)
	if err != nil {
		return nil, &fs.PathError{Op: "readdirent", Path: p, Err: syscall.ENOENT}
	}
	return os.ReadDir(h)
}

func (s *Server) shellAccess(ctx context.Context, p string, mode interp.AccessMode) error {
	h, err := s.mapShell(ctx, p, true)
	if err != nil {
		return &fs.PathError{Op: "access", Path: p, Err: syscall.ENOENT}
	}
	return interp.DefaultAccessHandler()(ctx, h, mode)
}

// execCommand runs an external command: rm and chmod (by name or as
// /bin/X, /usr/bin/X), nothing else.
func (s *Server) execCommand(ctx context.Context, args []string) error {
	hc := interp.HandlerCtx(ctx)
	resolve := func(follow bool) func(string) (string, error) {
		return func(p string) (string, error) { return s.mapShell(ctx, p, follow) }
	}
	code := -1
	switch args[0] {
	case "rm", "/bin/rm", "/usr/bin/rm":
		code = rmFiles(args[1:], hc.Stderr, resolve(false))
	case "chmod", "/bin/chmod", "/usr/bin/chmod":
		code = chmod(args[1:], hc.Stderr, resolve(true))
	}
	if code < 0 {
		line := uint(1)
		if hc.Pos.IsValid() {
			line = hc.Pos.Line()
		}
		fmt.Fprintf(hc.Stderr, "/bin/sh: %d: %s: not found\n", line, args[0])
		code = 127
	}
	if code == 0 {
		return nil
	}
	return interp.ExitStatus(code)
}

// bashOutput turns a command's two output streams into BashOutput events
// as upstream does, keeping only what execute answers.
type bashOutput struct {
	commandID uuid
	now       func() time.Time
	record    func(map[string]any) // saves and publishes each event

	mu      sync.Mutex
	pending [2][]rune // stdout, stderr: text not yet in a chunk
	order   int
	emitted int
	page    map[string]any // the 100th event, once there is one
}

func (o *bashOutput) writer(stderr bool) io.Writer {
	i := 0
	if stderr {
		i = 1
	}
	return streamWriter{o, i}
}

type streamWriter struct {
	o      *bashOutput
	stream int
}

func (w streamWriter) Write(p []byte) (int, error) {
	o := w.o
	o.mu.Lock()
	defer o.mu.Unlock()
	pend := &o.pending[w.stream]
	if *pend == nil {
		*pend = make([]rune, 0, bashChunkChars+bashReadSize)
	}
	for off := 0; off < len(p); off += bashReadSize {
		*pend = appendDecoded(*pend, p[off:min(off+bashReadSize, len(p))])
		for len(*pend) > bashChunkChars {
			text := string((*pend)[:bashChunkChars])
			*pend = (*pend)[:copy(*pend, (*pend)[bashChunkChars:])]
			var ev map[string]any
			if w.stream == 0 {
				ev = o.event(o.order, nil, &text, nil)
			} else {
				ev = o.event(o.order, nil, nil, &text)
			}
			o.emit(ev)
		}
	}
	return len(p), nil
}

func (o *bashOutput) emit(ev map[string]any) {
	if o.record != nil {
		o.record(ev)
	}
	o.order++
	o.emitted++
	if o.emitted == bashPageSize {
		o.page = ev
	}
}

// finish makes the final event (what is left of both streams, and the
// exit code) and returns the one execute answers.
func (o *bashOutput) finish(code int) map[string]any {
	o.mu.Lock()
	defer o.mu.Unlock()
	var stdout, stderr *string
	if len(o.pending[0]) > 0 {
		stdout = strp(string(o.pending[0]))
	}
	if len(o.pending[1]) > 0 {
		stderr = strp(string(o.pending[1]))
	}
	final := o.event(o.order, &code, stdout, stderr)
	o.emit(final)
	if o.emitted > bashPageSize {
		return o.page
	}
	return final
}

func (o *bashOutput) event(order int, code *int, stdout, stderr *string) map[string]any {
	return map[string]any{
		"kind":       "BashOutput",
		"id":         newUUID().dashed(),
		"timestamp":  pyTime(o.now()),
		"command_id": o.commandID.dashed(),
		"order":      order,
		"exit_code":  code,
		"stdout":     stdout,
		"stderr":     stderr,
	}
}

func intp(v int) *int       { return &v }
func strp(v string) *string { return &v }
