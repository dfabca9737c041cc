// Command emulators runs the Daytona, E2B, DigitalOcean, OpenHands
// runtime-api and Cloudflare Sandbox bridge emulators on local addresses for manual testing, with their admin routes
// (/_emulator/…) mounted, and the Modal gRPC emulator (-modal; no admin
// routes: it speaks gRPC only).
//
//	EMULATOR_TOKEN=secret emulators -daytona 127.0.0.1:7001 -e2b 127.0.0.1:7002 -digitalocean 127.0.0.1:7003 -runtimeapi 127.0.0.1:7004 -cloudflare 127.0.0.1:7005
//
// The token is taken from -token-file or $EMULATOR_TOKEN, not a flag, so it
// does not show up in process listings.
//
// Each emulator's box proxy answers on localhost names of its own port
// (Daytona 8000-{id}.localhost:7001, E2B 8000-{id}.localhost:7002, DO
// {label}.localhost:7003; a runtime-api runtime's url is the path
// localhost:7004/{runtime_id}; a Cloudflare tunnel {tunnel id}.localhost:7005);
// -agent-server URL forwards every box's port
// 8000 there, to one agent-server shared by all boxes.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/canvasapp/companion/e2e/emulators/cloudflare"
	"github.com/canvasapp/companion/e2e/emulators/daytona"
	"github.com/canvasapp/companion/e2e/emulators/digitalocean"
	"github.com/canvasapp/companion/e2e/emulators/e2b"
	"github.com/canvasapp/companion/e2e/emulators/emulator"
	modalemu "github.com/canvasapp/companion/e2e/emulators/modal"
	"github.com/canvasapp/companion/e2e/emulators/runtimeapi"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "emulators:", err)
		os.Exit(1)
	}
}

func run() error {
	dtAddr := flag.String("daytona", "", "serve the Daytona API (under /api) on this address")
	e2bAddr := flag.String("e2b", "", "serve the E2B API on this address")
	doAddr := flag.String("digitalocean", "", "serve the DigitalOcean /v2/agents API on this address")
	rtAddr := flag.String("runtimeapi", "", "serve the OpenHands runtime-api on this address")
	rtIdle := flag.Duration("runtimeapi-idle", 0, "how long a runtime-api runtime may be idle before the reaper pauses it (default 20m; negative: never)")
	modalAddr := flag.String("modal", "", "serve the Modal gRPC control plane and command router (plaintext HTTP/2) on this address; the SDK reaches it with MODAL_SERVER_URL=http://ADDR, the token secret is the token")
	modalTokenID := flag.String("modal-token-id", "ak-emulator", "the Modal token id accepted with the token (as the secret)")
	rtReap := flag.Duration("runtimeapi-paused-reap", 0, "stop runtime-api runtimes paused this long (default: never)")
	cfAddr := flag.String("cloudflare", "", "serve the Cloudflare Sandbox bridge Worker (/v1/sandbox…) on this address")
	cfSleep := flag.Duration("cloudflare-sleep", 0, "how long a Cloudflare container may be idle before it sleeps and loses its files (default 10m; negative: never)")
	cfKeep := flag.Bool("cloudflare-sleep-keeps-files", false, "keep /workspace across a Cloudflare sleep (the older docs' reading)")
	tokenFile := flag.String("token-file", "", "file holding the accepted token (default: $EMULATOR_TOKEN)")
	fake := flag.Bool("fake-clock", false, "freeze the clock; it then moves only through POST /_emulator/clock")
	start := flag.String("start", "", "with -fake-clock, the starting time (RFC 3339; default now)")
	instant := flag.Bool("instant", false, "make every asynchronous transition instant")
	listLag := flag.Duration("daytona-list-lag", 0, "how long Daytona's list lags behind creates and deletes (eventual consistency)")
	agentURL := flag.String("agent-server", "", "forward every box's port 8000 to this agent-server URL (default: the proxies answer /server_info themselves)")
	flag.Parse()
	if *dtAddr == "" && *e2bAddr == "" && *doAddr == "" && *rtAddr == "" && *cfAddr == "" && *modalAddr == "" {
		flag.Usage()
		return errors.New("give at least one of -daytona, -e2b, -digitalocean, -runtimeapi, -cloudflare, -modal")
	}
	token := os.Getenv("EMULATOR_TOKEN")
	if *tokenFile != "" {
		b, err := os.ReadFile(*tokenFile)
		if err != nil {
			return fmt.Errorf("reading token: %w", err)
		}
		token = strings.TrimSpace(string(b))
	}
	if token == "" {
		return errors.New("no token: set EMULATOR_TOKEN or -token-file")
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	var agent func(string) http.Handler
	if *agentURL != "" {
		u, err := url.Parse(*agentURL)
		if err != nil || u.Scheme == "" || u.Host == "" {
			return fmt.Errorf("-agent-server %q: want an absolute URL", *agentURL)
		}
		rp := httputil.NewSingleHostReverseProxy(u)
		agent = func(string) http.Handler { return rp }
	}

	newClock := func() (*emulator.Clock, error) {
		if !*fake {
			return emulator.NewWallClock(), nil
		}
		t := time.Now()
		if *start != "" {
			var err error
			if t, err = time.Parse(time.RFC3339, *start); err != nil {
				return nil, fmt.Errorf("-start: %w", err)
			}
		}
		return emulator.NewFakeClock(t), nil
	}

	type server struct {
		name, addr, api string
		handler         http.Handler
		base            *emulator.Base
		// proxyAt points the box proxy at the listener's port.
		proxyAt func(domain string)
	}
	var servers []server
	if *dtAddr != "" {
		c, err := newClock()
		if err != nil {
			return err
		}
		o := daytona.Options{Token: token, Clock: c, Admin: true, ListLag: *listLag, AgentServer: agent}
		if *instant {
			o.Delays = &daytona.Delays{}
		}
		s := daytona.New(o)
		servers = append(servers, server{"daytona", *dtAddr, "/api", s.Handler(), s.Base,
			func(d string) { s.SetProxy("http", d) }})
	}
	if *e2bAddr != "" {
		c, err := newClock()
		if err != nil {
			return err
		}
		s := e2b.New(e2b.Options{Token: token, Clock: c, Admin: true, AgentServer: agent})
		servers = append(servers, server{"e2b", *e2bAddr, "", s.Handler(), s.Base, s.SetDomain})
	}
	if *doAddr != "" {
		c, err := newClock()
		if err != nil {
			return err
		}
		o := digitalocean.Options{Token: token, Clock: c, Admin: true, AgentServer: agent}
		if *instant {
			o.Delays = &digitalocean.Delays{}
		}
		s := digitalocean.New(o)
		servers = append(servers, server{"digitalocean", *doAddr, "", s.Handler(), s.Base,
			func(d string) { s.SetIngressDomain("http", d) }})
	}
	if *rtAddr != "" {
		c, err := newClock()
		if err != nil {
			return err
		}
		s := runtimeapi.New(runtimeapi.Options{Token: token, Clock: c, Admin: true, AgentServer: agent,
			IdleAfter: *rtIdle, PausedReapAfter: *rtReap})
		servers = append(servers, server{"runtimeapi", *rtAddr, "", s.Handler(), s.Base,
			func(d string) { s.SetBaseURL("http://" + d) }})
	}
	if *cfAddr != "" {
		c, err := newClock()
		if err != nil {
			return err
		}
		s := cloudflare.New(cloudflare.Options{Token: token, Clock: c, Admin: true, AgentServer: agent,
			SleepAfter: *cfSleep, SleepKeepsFiles: *cfKeep})
		servers = append(servers, server{"cloudflare", *cfAddr, "/v1", s.Handler(), s.Base, s.SetDomain})
	}

	if *modalAddr != "" {
		c, err := newClock()
		if err != nil {
			return err
		}
		m := modalemu.New(modalemu.Options{TokenID: *modalTokenID, TokenSecret: token, Clock: c, AgentServer: agent})
		if err := m.StartOn(*modalAddr); err != nil {
			return fmt.Errorf("modal: %w", err)
		}
		defer m.Close()
		log.Info("serving", "emulator", "modal", "api", m.URL(), "tunnels", "one 127.0.0.1 port per sandbox")
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	errc := make(chan error, len(servers))
	var https []*http.Server
	for _, s := range servers {
		ln, err := net.Listen("tcp", s.addr)
		if err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
		hs := &http.Server{Handler: s.handler, ReadHeaderTimeout: 10 * time.Second}
		https = append(https, hs)
		url := "http://" + ln.Addr().String()
		domain := "localhost:" + strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
		s.proxyAt(domain)
		log.Info("serving", "emulator", s.name, "api", url+s.api, "admin", url+emulator.AdminPrefix, "box_proxy", "*."+domain)
		go func() {
			if err := hs.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
				errc <- fmt.Errorf("%s: %w", s.name, err)
			}
		}()
	}
	var err error
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for i, hs := range https {
		servers[i].base.Close() // end held hang faults first
		hs.Shutdown(shutdown)
	}
	return err
}
