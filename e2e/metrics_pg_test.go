package e2e

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/canvasapp/companion/internal/testsupport"
	"github.com/canvasapp/companion/internal/testsupport/pgtest"
)

// TestMetricsReadyzPostgres runs serve on PostgreSQL: /metrics (with the
// launch token, an admin) says the store is shared and that this replica
// holds the reconciler's lease of the local Docker account; /readyz is
// 200 while PostgreSQL answers, and 503 naming the store first once it
// is stopped, while /healthz stays 200 (the process still serves).
func TestMetricsReadyzPostgres(t *testing.T) {
	c, err := pgtest.Start()
	if err != nil {
		t.Fatalf("PostgreSQL is needed and could not be started: %v", err)
	}
	if os.Getenv(pgtest.EnvURL) != "" {
		t.Skip(pgtest.EnvURL + " names a shared server, which this test may not stop")
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			c.Stop()
		}
	})
	// The cluster's own database: a database of NewDatabase would be
	// dropped at the end, from a server this test stopped.
	url := c.URL
	key := genKey(t, t.TempDir(), "secret-key")
	p := start(t, options{mode: "serve", dataDir: t.TempDir(), env: noKeyring, args: []string{"--database", url,
		"--secrets", "sealed", "--secret-key-file", key, "--docker-scope", dockerScope(t)}})

	testsupport.Poll(t, 30*time.Second, func() error {
		if code, body := get(t, p.ready.URL+"/readyz", "", ""); code != 200 {
			return fmt.Errorf("GET /readyz = %d %s, want 200", code, body)
		}
		fams := scrape(t, p.ready.URL+"/metrics", p.ready.Token)
		if v := sumOf(fams, "companion_store_shared", nil); v != 1 {
			return fmt.Errorf("companion_store_shared = %v, want 1", v)
		}
		if v := sumOf(fams, "companion_account_leases", nil); v < 1 {
			return fmt.Errorf("companion_account_leases = %v, want at least 1 (the local Docker account)", v)
		}
		if v := sumOf(fams, "companion_account_leases_taken_total", nil); v < 1 {
			return fmt.Errorf("companion_account_leases_taken_total = %v, want at least 1", v)
		}
		return nil
	})

	stopped = true
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	testsupport.Poll(t, 60*time.Second, func() error {
		code, body := get(t, p.ready.URL+"/readyz", "", "")
		// The sealed secret store is in the database too: it may fail
		// with it, after it.
		if code != 503 || !strings.Contains(body, `"failing":["store"`) || !strings.Contains(body, `"store":"failing"`) {
			return fmt.Errorf("GET /readyz with PostgreSQL stopped = %d %s, want 503 naming the store", code, body)
		}
		return nil
	})
	if code, body := get(t, p.ready.URL+"/healthz", "", ""); code != 200 {
		t.Errorf("GET /healthz with PostgreSQL stopped = %d %s, want 200: the process serves", code, body)
	}
}
