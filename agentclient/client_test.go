package agentclient

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// These fixtures serve the wire shapes the reference leaves open, which the
// emulator (e2e/agentserver, tested there against this client) renders one
// way only.

func serve(t *testing.T, h http.HandlerFunc) *Client {
	t.Helper()
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	c, err := New(Endpoint{URL: ts.URL, SessionKey: "sk-secret"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestServerInfoBothNumberReadings(t *testing.T) {
	for _, body := range []string{
		`{"uptime": 100, "idle_time": 12, "future_field": {"x": 1}}`,
		`{"uptime": 100.0, "idle_time": 12.0, "runtime_idle_timeout_seconds": null}`,
	} {
		c := serve(t, func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get(SessionKeyHeader) != "" {
				t.Error("the session key was sent to /server_info, which takes none")
			}
			fmt.Fprint(w, body)
		})
		si, err := c.ServerInfo(context.Background())
		if err != nil || si.Idle() != 12*time.Second || si.RuntimeIdleTimeoutSeconds != nil {
			t.Errorf("%s: %+v %v", body, si, err)
		}
	}
}

// TestPagingBothReadings serves pages that start at next_page_id (upstream)
// and pages that start after it, with dashed and hex ids: each conversation
// is listed once either way.
func TestPagingBothReadings(t *testing.T) {
	ids := []string{"00000000-0000-4000-8000-000000000001", "00000000-0000-4000-8000-000000000002",
		"00000000-0000-4000-8000-000000000003"}
	for _, startAt := range []bool{true, false} {
		for _, dashed := range []bool{true, false} {
			c := serve(t, func(w http.ResponseWriter, r *http.Request) {
				if r.Header.Get(SessionKeyHeader) != "sk-secret" || r.URL.Query().Get("limit") != "100" {
					http.Error(w, `{"detail":"Unauthorized"}`, http.StatusUnauthorized)
					return
				}
				i := 0
				if p := r.URL.Query().Get("page_id"); p != "" {
					for k, id := range ids {
						if strings.ReplaceAll(id, "-", "") == strings.ReplaceAll(p, "-", "") {
							i = k
						}
					}
					if !startAt {
						i++
					}
				}
				next := "null"
				nextIdx := i + 2 // two per page
				if !startAt {
					nextIdx = i + 1
				}
				if nextIdx < len(ids) {
					n := ids[nextIdx]
					if !startAt {
						n = ids[nextIdx-1]
					}
					if !dashed {
						n = strings.ReplaceAll(n, "-", "")
					}
					next = `"` + n + `"`
				}
				var items []string
				for k := i; k < min(i+2, len(ids)); k++ {
					items = append(items, fmt.Sprintf(`{"id":%q,"execution_status":"idle","created_at":"2026-08-22T10:00:0%dZ","updated_at":"2026-08-22T10:00:00.123456+00:00","extra":[1]}`, ids[k], k))
				}
				fmt.Fprintf(w, `{"items":[%s],"next_page_id":%s}`, strings.Join(items, ","), next)
			})
			all, err := c.AllConversations(context.Background())
			if err != nil {
				t.Fatalf("startAt=%v dashed=%v: %v", startAt, dashed, err)
			}
			var got []string
			for _, cv := range all {
				got = append(got, cv.ID)
			}
			if strings.Join(got, ",") != strings.Join(ids, ",") {
				t.Errorf("startAt=%v dashed=%v: got %v", startAt, dashed, got)
			}
		}
	}
}

func TestPagingThatNeverAdvancesIsAnError(t *testing.T) {
	c := serve(t, func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"items":[],"next_page_id":"abc"}`)
	})
	if _, err := c.AllConversations(context.Background()); err == nil || !strings.Contains(err.Error(), "repeats") {
		t.Fatalf("AllConversations = %v, want a loop error", err)
	}
}

func TestErrorClassesAndRetryAfter(t *testing.T) {
	now := time.Now()
	cases := []struct {
		status     int
		retryAfter string
		body       string
		want       error
		wantAfter  time.Duration
	}{
		{400, "", `{"detail":"Not a git repository: /w"}`, ErrNothingToArchive, 0},
		{401, "", `{"detail":"Unauthorized"}`, ErrUnconfirmed, 0},
		{404, "", `{"detail":"Directory not found"}`, ErrUnconfirmed, 0},
		{422, "", `{"detail":[{"type":"missing","loc":["query","path"]}]}`, ErrRetryable, 0},
		{429, "7", `{"detail":"slow down"}`, ErrRetryable, 7 * time.Second},
		{503, now.Add(time.Hour).UTC().Format(http.TimeFormat), `{"detail":"initializing"}`, ErrRetryable, time.Hour},
		{500, "", `{"detail":"Internal Server Error","exception":"git failed"}`, ErrRetryable, 0},
		{403, "", `forbidden`, ErrPermanent, 0},
	}
	for _, cs := range cases {
		c := serve(t, func(w http.ResponseWriter, r *http.Request) {
			if cs.retryAfter != "" {
				w.Header().Set("Retry-After", cs.retryAfter)
			}
			w.WriteHeader(cs.status)
			fmt.Fprint(w, cs.body)
		})
		_, err := c.Archive(context.Background(), ArchiveRequest{Path: "/w", Format: FormatTarGz})
		var ae *Error
		if !errors.Is(err, cs.want) || !errors.As(err, &ae) || ae.Status != cs.status {
			t.Errorf("%d: %v, want %v", cs.status, err, cs.want)
			continue
		}
		if d := ae.RetryAfter - cs.wantAfter; d < -2*time.Second || d > 0 {
			t.Errorf("%d: retry after %v, want %v", cs.status, ae.RetryAfter, cs.wantAfter)
		}
		if strings.Contains(err.Error(), "sk-secret") {
			t.Errorf("%d: the error text carries the session key", cs.status)
		}
	}
	// 400 means "nothing to archive" only on the archive route.
	c := serve(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(400) })
	if _, err := c.DownloadTrajectory(context.Background(), "abc"); !errors.Is(err, ErrPermanent) {
		t.Errorf("400 on trajectory: %v", err)
	}
}

func TestArchiveHeadersBothEncodings(t *testing.T) {
	for _, enc := range []bool{true, false} {
		c := serve(t, func(w http.ResponseWriter, r *http.Request) {
			q := r.URL.Query()
			if q.Get("format") != "git-delta" || q.Get("use_default_excludes") != "true" || q.Get("base_ref") != "main" {
				t.Errorf("query %v", q)
			}
			if enc {
				w.Header().Set("X-Archive-Repo-Root", "%2Fworkspace%2Fmy%20proj")
				w.Header().Set("X-Archive-Branch", "feat%2Fa%2Bb")
				w.Header().Set("X-Archive-Repo-Remote", "https%3A%2F%2Fgit.example%2Fr.git")
			} else {
				w.Header().Set("X-Archive-Repo-Root", "/workspace/my proj")
				w.Header().Set("X-Archive-Branch", "feat/a+b")
				w.Header().Set("X-Archive-Repo-Remote", "https://git.example/r.git")
			}
			w.Header().Set("X-Archive-Base-Commit", "0123abcd")
			w.Header().Set("X-Archive-Base-Ref", "main")
			w.Header().Set("Content-Disposition", `attachment; filename="my proj.patch"`)
			fmt.Fprint(w, "diff")
		})
		a, err := c.Archive(context.Background(), ArchiveRequest{Path: "/workspace", Format: FormatGitDelta, BaseRef: "main", DefaultExcludes: true})
		if err != nil {
			t.Fatal(err)
		}
		a.Body.Close()
		want := ArchiveMeta{RepoRemote: "https://git.example/r.git", Branch: "feat/a+b", RepoRoot: "/workspace/my proj",
			BaseCommit: "0123abcd", BaseRef: "main"}
		if a.Meta != want || a.Filename != "my proj.patch" {
			t.Errorf("encoded=%v: %+v %q", enc, a.Meta, a.Filename)
		}
	}
}

func TestBadRequestsRefusedLocally(t *testing.T) {
	if _, err := New(Endpoint{URL: "ftp://x"}, nil); err == nil {
		t.Error("ftp URL accepted")
	}
	c := serve(t, func(w http.ResponseWriter, r *http.Request) { t.Error("a bad request reached the server") })
	for _, r := range []ArchiveRequest{{Path: "rel", Format: FormatTarGz}, {Path: "/a", Format: "zip"},
		{Path: "/a", Format: FormatGitDelta, BaseRef: "-x"}} {
		if _, err := c.Archive(context.Background(), r); err == nil {
			t.Errorf("%+v accepted", r)
		}
	}
	if _, err := c.DownloadTrajectory(context.Background(), "../x"); err == nil {
		t.Error("bad id accepted")
	}
}

func TestBodyCutShortIsRetryable(t *testing.T) {
	c := serve(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "100000")
		w.WriteHeader(http.StatusOK)
		w.Write([]byte("only a little"))
		// The handler returns: the server closes a response shorter than
		// its declared length.
	})
	a, err := c.Archive(context.Background(), ArchiveRequest{Path: "/w", Format: FormatTarGz})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Body.Close()
	_, err = io.ReadAll(a.Body)
	var ae *Error
	if !errors.Is(err, ErrRetryable) || !errors.As(err, &ae) || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("reading a cut body: %v, want a retryable *Error wrapping io.ErrUnexpectedEOF", err)
	}
}

func TestRedirectNotFollowed(t *testing.T) {
	leaked := false
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		leaked = r.Header.Get(SessionKeyHeader) != "" || r.Header.Get("X-Proxy-Token") != ""
	}))
	defer elsewhere.Close()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, elsewhere.URL+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	defer ts.Close()
	c, err := New(Endpoint{URL: ts.URL, SessionKey: "sk-secret", Headers: http.Header{"X-Proxy-Token": {"pt"}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Archive(context.Background(), ArchiveRequest{Path: "/w", Format: FormatTarGz})
	var ae *Error
	if !errors.As(err, &ae) || ae.Status != http.StatusTemporaryRedirect || !errors.Is(err, ErrPermanent) {
		t.Fatalf("redirect: %v, want a permanent *Error with status 307", err)
	}
	if leaked {
		t.Fatal("the session key or the proxy token reached the redirect target")
	}
}
