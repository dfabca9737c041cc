// Package pgtest gives tests a real PostgreSQL: a throwaway cluster that
// Main starts once per test binary (initdb and pg_ctl of Debian's
// postgresql package into a temp dir, on a free loopback port) and stops
// when the tests end, or the server COMPANION_TEST_DATABASE names (a
// postgres:// URL of a user that may create databases). Every test gets a
// fresh, empty database of its own from NewDatabase.
//
// When no server can be had, tests that ask for one fail, saying why: they
// never skip, so a machine without PostgreSQL cannot pass silently.
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// EnvURL names a running server to use instead of a throwaway cluster.
const EnvURL = "COMPANION_TEST_DATABASE"

var (
	adminURL string // a URL of the server's "postgres" database
	errStart = errors.New("pgtest: Main did not run; call pgtest.Main from the package's TestMain")
	seq      atomic.Int64
)

// Main starts (or finds) the server, runs the tests and stops the server.
// Use it as `func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }`.
// A failure to start is reported by every test that calls NewDatabase.
func Main(m *testing.M) int {
	c, err := Start()
	if err != nil {
		errStart = err
		fmt.Fprintln(os.Stderr, err)
	} else {
		errStart = nil
		adminURL = c.URL
	}
	code := m.Run()
	if c != nil {
		if err := c.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}
	return code
}

// Cluster is a running server. Stop stops it when this package started it.
type Cluster struct {
	URL  string // the "postgres" database, as a user that may create databases
	dir  string
	bin  string
	asPG bool // started through runuser as the postgres user (we are root)
}

// Start returns the server of COMPANION_TEST_DATABASE when set, else starts
// a throwaway cluster.
func Start() (*Cluster, error) {
	if u := os.Getenv(EnvURL); u != "" {
		return &Cluster{URL: u}, nil
	}
	bin, err := findBin()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "companion-pg-")
	if err != nil {
		return nil, fmt.Errorf("pgtest: %w", err)
	}
	c := &Cluster{dir: dir, bin: bin, asPG: os.Geteuid() == 0}
	if c.asPG {
		// initdb refuses to run as root; the postgres user owns the dir.
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, fmt.Errorf("pgtest: running as root needs the postgres user (Debian's postgresql package): %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			return nil, fmt.Errorf("pgtest: %w", err)
		}
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	data := filepath.Join(dir, "db")
	if out, err := c.run("initdb", "-D", data, "-A", "trust", "-U", "companion", "--no-sync", "-E", "UTF8"); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("pgtest: initdb: %w\n%s", err, out)
	}
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off", port, dir)
	if out, err := c.run("pg_ctl", "-D", data, "-l", filepath.Join(dir, "log"), "-o", opts, "-w", "start"); err != nil {
		log, _ := os.ReadFile(filepath.Join(dir, "log"))
		os.RemoveAll(dir)
		return nil, fmt.Errorf("pgtest: pg_ctl start: %w\n%s\n%s", err, out, log)
	}
	c.URL = fmt.Sprintf("postgres://companion@127.0.0.1:%d/postgres?sslmode=disable", port)
	return c, nil
}

// Stop stops a cluster Start started and removes its files.
func (c *Cluster) Stop() error {
	if c.dir == "" {
		return nil
	}
	out, err := c.run("pg_ctl", "-D", filepath.Join(c.dir, "db"), "-m", "immediate", "-w", "stop")
	os.RemoveAll(c.dir)
	if err != nil {
		return fmt.Errorf("pgtest: pg_ctl stop: %w\n%s", err, out)
	}
	return nil
}

func (c *Cluster) run(tool string, args ...string) ([]byte, error) {
	path := filepath.Join(c.bin, tool)
	var cmd *exec.Cmd
	if c.asPG {
		cmd = exec.Command("runuser", append([]string{"-u", "postgres", "--", path}, args...)...)
	} else {
		cmd = exec.Command(path, args...)
	}
	cmd.Dir = os.TempDir()
	return cmd.CombinedOutput()
}

// findBin returns the newest /usr/lib/postgresql/*/bin holding initdb.
func findBin() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool {
		vi, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[i])))
		vj, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[j])))
		return vi > vj
	})
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	return "", fmt.Errorf("pgtest: no PostgreSQL server found under /usr/lib/postgresql/*/bin; install Debian's postgresql package (scripts/setup.sh --test) or set %s to a postgres:// URL", EnvURL)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("pgtest: find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// URL returns the admin URL of the server Main started, failing t when
// there is none.
func URL(t testing.TB) string {
	t.Helper()
	if errStart != nil {
		t.Fatalf("PostgreSQL is needed and could not be started: %v", errStart)
	}
	return adminURL
}

// NewDatabase creates an empty database for t on the server Main
// started, dropped when t ends, and returns its URL.
func NewDatabase(t testing.TB) string {
	t.Helper()
	return newDatabase(t, URL(t))
}

// NewDatabase creates an empty database for t on c, dropped when t ends,
// and returns its URL. For packages whose TestMain cannot be Main's.
func (c *Cluster) NewDatabase(t testing.TB) string {
	t.Helper()
	return newDatabase(t, c.URL)
}

func newDatabase(t testing.TB, admin string) string {
	t.Helper()
	name := fmt.Sprintf("t_%d_%d_%s", os.Getpid(), seq.Add(1), sanitize(t.Name()))
	if len(name) > 60 {
		name = name[:60]
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		t.Fatalf("pgtest: connect to %s: %v", admin, err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `CREATE DATABASE `+pgx.Identifier{name}.Sanitize()+` TEMPLATE template0`); err != nil {
		t.Fatalf("pgtest: create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		conn, err := pgx.Connect(ctx, admin)
		if err != nil {
			t.Errorf("pgtest: drop database %s: %v", name, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, `DROP DATABASE IF EXISTS `+pgx.Identifier{name}.Sanitize()+` WITH (FORCE)`); err != nil {
			t.Errorf("pgtest: drop database %s: %v", name, err)
		}
	})
	u, err := url.Parse(admin)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	u.Path = "/" + name
	return u.String()
}

func sanitize(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			return r
		case r >= 'A' && r <= 'Z':
			return r + 'a' - 'A'
		}
		return '_'
	}, s)
}
