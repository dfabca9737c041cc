// Command agentserver emulates the OpenHands agent-server that runs inside
// every box, for companion's tests. It follows
// shared/reference/agent-server.md and docs/agent-server-files.md: the
// unauthenticated probes (/server_info, /alive, /health, /ready, GET /),
// X-Session-API-Key auth on /api/*, conversations persisted on disk, the
// trajectory download with secret redaction, and the file routes with
// upstream's rules: the workspace archive (GET /api/file/archive: tar.gz
// in pure Go; git-delta through the git binary when there is one, else a
// pure-Go writer over loose objects), download, multipart upload (streamed),
// create_directory, search_subdirs and home. One process-wide idle clock
// is reset by conversation events, the bash routes and the file routes
// upstream counts as activity, never by reads.
//
// The bash routes run the command for real. There is no shell in the box
// image, so commands are interpreted in-process (mvdan.cc/sh, POSIX
// syntax and builtins); the only external commands are rm and chmod,
// implemented in Go, and any other answers "not found" with status 127.
// Bash events (BashCommand, BashOutput) are kept on disk as upstream keeps
// them; the /api/bash/bash_events routes that read them are not emulated.
//
// The WebSocket routes follow docs/agent-server-sockets.md:
// /sockets/events/{conversation_id} streams a conversation's events (a
// state snapshot first, stored events again on resend_mode=all|since) and
// takes user messages; /sockets/bash-events streams bash events
// (resend_mode=all) and takes bash commands. Keys are checked in the
// handshake (session_api_key query parameter, then X-Session-API-Key: a
// wrong one is refused with 403) or, when none is given, from a first
// {"type":"auth","session_api_key":K} frame within 10 s (else close
// 4001). Unknown conversation: close 4004; more than upstream's 50
// subscribers: close 1013; on SIGTERM/SIGINT every socket is closed with
// 1012, as uvicorn does.
//
// It is a static program (CGO_ENABLED=0) so it runs in an image built FROM
// scratch (see e2e/boximage).
//
// Configuration, as the real server reads it where one exists:
//
//	--host, --port               bind address; default port 8000, host 0.0.0.0
//	                             when a session key is set, else 127.0.0.1
//	EMULATOR_LISTEN              host:port, overrides --host/--port
//	OH_SESSION_API_KEYS_0, _1…   session keys (also OH_SESSION_API_KEYS as a
//	                             JSON list, and legacy SESSION_API_KEY); none
//	                             means /api/* is open
//	OH_CONVERSATIONS_PATH        default workspace/conversations (relative to
//	                             the working directory, / in the box image)
//	OH_BASH_EVENTS_DIR           where bash events are kept; default
//	                             bash_events beside the conversations
//	                             directory (upstream: workspace/bash_events)
//	OH_RUNTIME_IDLE_TIMEOUT_SECONDS  reported in /server_info when > 0
//	OPENHANDS_BUILD_GIT_SHA, OPENHANDS_BUILD_GIT_REF  reported in /server_info
//
// Emulator-only knobs:
//
//	EMULATOR_STOP_GRACE_SECONDS  on SIGTERM/SIGINT keep serving this long
//	                             before exiting (default 0: exit at once), so
//	                             a test can make `docker stop` slow
//	EMULATOR_READY_DELAY_SECONDS /ready answers 503 "initializing" this long
//	                             after start
//	EMULATOR_IDLE_AT_START_SECONDS  idle_time starts at this many seconds
//	                             (uptime still starts at 0), so a test sees a
//	                             long-idle box without waiting on the clock
//	EMULATOR_PURE_GIT=1          git-delta with the built-in Go writer even
//	                             when a git binary is present
//	EMULATOR_SEED_REPO=DIR       make DIR a real git repository (origin/main,
//	                             a commit, uncommitted work) at start, if it
//	                             is not one, so a box has work to export;
//	                             under EMULATOR_FS_ROOT an absolute DIR is a
//	                             box path
//	EMULATOR_FS_ROOT=DIR         take DIR as the box's "/": every absolute
//	                             path a request names (file routes, bash cwd,
//	                             and the files a bash command opens, lists or
//	                             hands to rm and chmod) is looked up under
//	                             DIR, and paths in answers are written as
//	                             the box sees them; a path that leads out of
//	                             DIR through ".." or a symlink is not found
//	                             (for a host-run emulator that stands for a
//	                             box, as the e2e farm's)
//
// Logs go to stderr.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

func main() {
	// The box image is FROM scratch: the same binary is its /bin/rm, the
	// one command companion runs in a box (a restore deleting what the
	// snapshotted box had deleted).
	if filepath.Base(os.Args[0]) == "rm" {
		os.Exit(rm(os.Args[1:], os.Stderr))
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := run(log, os.Args[1:]); err != nil {
		log.Error("agent-server emulator failed", "err", err)
		os.Exit(1)
	}
}

func run(log *slog.Logger, args []string) error {
	fs := flag.NewFlagSet("agentserver", flag.ContinueOnError)
	host := fs.String("host", "", "address to bind (default 0.0.0.0 when a session key is set, else 127.0.0.1)")
	port := fs.Int("port", 8000, "port to listen on")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, err := ConfigFromEnv(os.Getenv)
	if err != nil {
		return err
	}
	addr := os.Getenv("EMULATOR_LISTEN")
	if addr == "" {
		h := *host
		if h == "" {
			// The real server binds loopback unless a key protects it.
			h = "127.0.0.1"
			if len(cfg.Keys) > 0 {
				h = "0.0.0.0"
			}
		}
		addr = net.JoinHostPort(h, strconv.Itoa(*port))
	}
	grace, err := envSeconds(os.Getenv, "EMULATOR_STOP_GRACE_SECONDS")
	if err != nil {
		return err
	}

	// Caught from the start: as PID 1 in a container an uncaught SIGTERM
	// is ignored, and a stop may come before the server is up.
	sigc := make(chan os.Signal, 1)
	signal.Notify(sigc, syscall.SIGTERM, syscall.SIGINT)

	srv, err := NewServer(cfg, log)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	log.Info("agent-server emulator listening", "addr", ln.Addr().String(), "conversations", cfg.ConversationsPath,
		"auth", len(cfg.Keys) > 0, "stop_grace", grace)

	select {
	case err := <-errc:
		return err
	case sig := <-sigc:
		if grace > 0 {
			log.Info("signal received; holding on before exiting", "signal", sig.String(), "grace", grace)
			time.Sleep(grace)
		}
		log.Info("shutting down", "signal", sig.String())
	}
	// http.Server.Shutdown does not see hijacked connections; uvicorn
	// closes open sockets with 1012 as it stops.
	srv.CloseSockets()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := hs.Shutdown(ctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}

func envSeconds(getenv func(string) string, name string) (time.Duration, error) {
	v := getenv(name)
	if v == "" {
		return 0, nil
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f < 0 {
		return 0, fmt.Errorf("%s=%q: want a number of seconds >= 0", name, v)
	}
	return time.Duration(f * float64(time.Second)), nil
}
