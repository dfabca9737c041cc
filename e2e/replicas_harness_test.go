package e2e

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/canvasapp/companion/internal/testsupport"
	"github.com/canvasapp/companion/providers/builtin/docker"
)

// replicaSet is n `companion serve --auth local` replicas sharing one
// PostgreSQL database, one Docker scope, one export directory and one
// sealed-secrets key, behind Caddy: a team's deployment of several
// replicas, in miniature.
type replicaSet struct {
	t *testing.T
	// DB is the database URL; dbFile holds it for --database-file.
	DB     string
	dbFile string
	// Proxy is Caddy's base URL; it spreads requests over the replicas
	// round robin.
	Proxy string
	// Replicas[i] is replica i, reachable at Replicas[i].ready.URL; nil
	// while it is stopped.
	Replicas []*proc
	// Token is a personal API token of the admin user "alice", valid on
	// every replica.
	Token string
	// Scope labels the Docker containers the replicas share.
	Scope string
	// SecretKey is the sealed store's key file every replica uses.
	SecretKey string
	// Exports is the export dir every replica shares.
	Exports string

	ports []string // each replica's fixed listen port, so Caddy finds it again after a restart
	args  [][]string
	env   []string
	data  []string
}

// replicaOpts adjusts startReplicas.
type replicaOpts struct {
	// Image is the box image; empty means idleBoxImage (a box idle from
	// the start, so a delete preview is never outdated by a slow reading).
	Image string
	// Args are extra serve flags for every replica; Env extra environment.
	Args []string
	Env  []string
	// ArgsOf are extra serve flags for replica i only, after Args.
	ArgsOf map[int][]string
	// ExportStore, when set, is the --export-store every replica uses
	// instead of the shared export dir.
	ExportStore string
}

// startReplicas starts PostgreSQL, makes user alice and her token with the
// CLI, then starts n replicas one after another and Caddy in front of them.
func startReplicas(t *testing.T, n int, o replicaOpts) *replicaSet {
	t.Helper()
	if o.Image == "" {
		o.Image = idleBoxImage(t)
	}
	rs := &replicaSet{t: t, DB: startPG(t), Scope: dockerScope(t), env: o.Env}
	dir := t.TempDir()
	rs.dbFile = filepath.Join(dir, "database-url")
	if err := os.WriteFile(rs.dbFile, []byte(rs.DB+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	exports := filepath.Join(dir, "exports")
	if err := os.Mkdir(exports, 0o700); err != nil {
		t.Fatal(err)
	}
	rs.Exports = exports
	key := genKey(t, dir, "secret-key")
	rs.SecretKey = key
	userData := t.TempDir()
	addUser(t, userData, "alice", "alice-password-1", "--database-file", rs.dbFile)
	rs.Token = strings.TrimSpace(cli(t, "", "tokens", "create", "--user", "alice", "--database-file", rs.dbFile))

	proxyPort := freePort(t)
	rs.Proxy = "http://127.0.0.1:" + proxyPort
	for range n {
		rs.ports = append(rs.ports, freePort(t))
		rs.data = append(rs.data, t.TempDir())
	}
	exportsAt := []string{"--export-dir", exports}
	if o.ExportStore != "" {
		exportsAt = []string{"--export-store", o.ExportStore}
	}
	for i := range n {
		rs.args = append(rs.args, append([]string{
			"--listen", "127.0.0.1:" + rs.ports[i], "--auth", "local", "--trusted-proxy", "127.0.0.1/32",
			"--database-file", rs.dbFile, "--secrets", "sealed", "--secret-key-file", key,
			exportsAt[0], exportsAt[1], "--docker-image", o.Image, "--docker-scope", rs.Scope,
			"--allow-host", "127.0.0.1:" + proxyPort,
		}, append(o.Args, o.ArgsOf[i]...)...))
	}
	rs.Replicas = make([]*proc, n)
	for i := range n {
		rs.start(i)
	}
	startCaddy(t, dir, proxyPort, rs.ports)
	return rs
}

// start (re)starts replica i, with extra environment (a crash point, say).
func (rs *replicaSet) start(i int, env ...string) *proc {
	rs.t.Helper()
	if p := rs.Replicas[i]; p != nil {
		p.kill()
	}
	p := start(rs.t, options{mode: "serve", dataDir: rs.data[i], args: rs.args[i],
		env: append(append(append([]string{}, noKeyring...), rs.env...), env...)})
	rs.Replicas[i] = p
	return p
}

// kill stops replica i with SIGKILL, as a crash would.
func (rs *replicaSet) kill(i int) {
	if p := rs.Replicas[i]; p != nil {
		p.kill()
		rs.Replicas[i] = nil
	}
}

// client is alice's API client at base (rs.Proxy or a replica's URL).
func (rs *replicaSet) client(base string) *webClient {
	c := newWebClient(rs.t, base)
	c.bearer = rs.Token
	return c
}

// dial opens alice's stream at base; since < 0 means no ?since.
func (rs *replicaSet) dial(base string, since int64) *stream {
	rs.t.Helper()
	s, code := rs.client(base).dialWS(since, nil)
	if code != 101 {
		rs.t.Fatalf("stream at %s: handshake status %d", base, code)
	}
	return s
}

// addAccountCLI adds a Daytona account for alice with
// `companion accounts add --database-file` (data as its --data-dir), sealed
// with the replicas' key, while they run; it returns the account's id.
func (rs *replicaSet) addAccountCLI(data, label, apiURL string) string {
	rs.t.Helper()
	stdout, errs, code := runCLI(rs.t, noKeyring, sealedToken+"\n", "accounts", "add", "daytona", "--label", label,
		"--config", "api_url="+apiURL, "--user", "alice", "--database-file", rs.dbFile, "--data-dir", data,
		"--secrets", "sealed", "--secret-key-file", rs.SecretKey)
	if code != 0 {
		rs.t.Fatalf("accounts add --database-file: exit %d\n%s%s", code, stdout, errs)
	}
	return addedID(rs.t, stdout)
}

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, port, _ := net.SplitHostPort(l.Addr().String())
	return port
}

// startCaddy runs Debian's Caddy as the replicas' reverse proxy on port,
// round robin over upstream ports; a replica that is down is skipped.
// caddyEnv fills the deployment Caddyfiles' placeholders for a test: a
// plain-http site on loopback, no admin endpoint, state under dir.
func caddyEnv(dir, site, upstreams string) []string {
	return []string{"HOME=" + dir, "XDG_DATA_HOME=" + dir, "XDG_CONFIG_HOME=" + dir,
		"COMPANION_SITE=" + site, "COMPANION_UPSTREAMS=" + upstreams, "CADDY_ADMIN=off"}
}

func startCaddy(t *testing.T, dir, port string, upstreams []string) {
	t.Helper()
	bin, err := exec.LookPath("caddy")
	if err != nil {
		t.Fatalf("Caddy is needed for the replica tests (apt-get install caddy; make test installs it): %v", err)
	}
	var to []string
	for _, u := range upstreams {
		to = append(to, "127.0.0.1:"+u)
	}
	// The deployment file operators use, with the test's addresses.
	file, err := filepath.Abs(filepath.Join("..", "deploy", "Caddyfile.replicas"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "run", "--config", file, "--adapter", "caddyfile")
	cmd.Env = append(os.Environ(), caddyEnv(dir, "http://127.0.0.1:"+port, strings.Join(to, " "))...)
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start caddy: %v", err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-done
		if t.Failed() {
			t.Logf("caddy output:\n%s", out.String())
		}
	})
	testsupport.Until(t, 30*time.Second, "caddy listens on "+port, func() bool {
		select {
		case <-done:
			t.Fatalf("caddy exited:\n%s", out.String())
		default:
		}
		c, err := net.DialTimeout("tcp", "127.0.0.1:"+port, time.Second)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	// Through Caddy, an unauthenticated /v1/login answers: the chain works.
	testsupport.Until(t, 30*time.Second, "a replica answers through caddy", func() bool {
		resp, err := http.Get("http://127.0.0.1:" + port + "/v1/login")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	// From here on, what clients exchange with companion through Caddy is
	// checked against the API contract as a direct exchange is: the
	// ingress must pass companion's answers on as they are.
	url := "http://127.0.0.1:" + port
	contract.Register(url)
	t.Cleanup(func() {
		for _, f := range contract.Forget(url) {
			t.Error(f)
		}
	})
}

// dockerEvents records the Docker Engine's container events for one
// scope, as the provider sees them: the count of calls that took effect.
type dockerEvents struct {
	mu  sync.Mutex
	at  map[string][]time.Time // containerID + " " + action → when each happened
	all []string
}

// watchDocker follows /events for the containers labelled with scope
// until the test ends.
func watchDocker(t *testing.T, scope string) *dockerEvents {
	t.Helper()
	cli, err := client.New(client.FromEnv)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	res := cli.Events(ctx, client.EventsListOptions{Filters: client.Filters{}.
		Add("type", "container").Add("label", docker.LabelScope+"="+scope)})
	d := &dockerEvents{at: map[string][]time.Time{}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case m := <-res.Messages:
				d.mu.Lock()
				k := m.Actor.ID + " " + string(m.Action)
				d.at[k] = append(d.at[k], time.Unix(0, m.TimeNano))
				d.all = append(d.all, fmt.Sprintf("%s %s", shortID(m.Actor.ID), m.Action))
				d.mu.Unlock()
			case <-res.Err:
				return
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		cli.Close()
		if t.Failed() {
			t.Logf("docker events for scope %s: %s", scope, d.String())
		}
	})
	return d
}

// count is how often action ("pause", "unpause", "destroy", "create",
// "start", …) happened to the container.
func (d *dockerEvents) count(containerID, action string) int {
	return len(d.times(containerID, action))
}

// times is when action happened to the container (an id or its prefix).
func (d *dockerEvents) times(containerID, action string) []time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []time.Time
	for k, ts := range d.at {
		id, a, _ := strings.Cut(k, " ")
		if a == action && strings.HasPrefix(id, containerID) {
			out = append(out, ts...)
		}
	}
	return out
}

func (d *dockerEvents) String() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return strings.Join(d.all, ", ")
}

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// TestReplicaHarness: the two replicas and Caddy come up; alice's token
// works on each replica directly and through Caddy; a workspace created
// through one replica runs, and Docker reports its container's creation
// once.
func TestReplicaHarness(t *testing.T) {
	rs := startReplicas(t, 2, replicaOpts{})
	ev := watchDocker(t, rs.Scope)
	a, b := rs.client(rs.Replicas[0].ready.URL), rs.client(rs.Replicas[1].ready.URL)
	via := rs.client(rs.Proxy)
	for _, c := range []*webClient{a, b, via} {
		c.must(200, "GET", "/v1/workspaces", nil, nil)
	}
	_, box := rs.createOn(a, "on-a")
	testsupport.Until(t, 10*time.Second, "docker reports the box's creation", func() bool { return ev.count(box, "create") > 0 })
	if n := ev.count(box, "create"); n != 1 {
		t.Fatalf("the box was created %d times at Docker, want 1 (%s)", n, ev)
	}
}
