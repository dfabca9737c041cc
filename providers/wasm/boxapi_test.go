package wasm

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// boxAPI is the small provider API the good module drives: boxes with a
// started/stopped state machine, pagination, auth, and switches for 429 and
// 5xx. It records every request's headers.
type boxAPI struct {
	t     testing.TB
	token string
	srv   *httptest.Server

	mu        sync.Mutex
	boxes     map[string]*apiBox
	order     []string
	seq       int
	pageSize  int
	rateLimit bool
	fail      bool
	requests  []recorded
	redirect  string // where GET /boxes/redirected points
}

type recorded struct {
	Method, Path string
	Header       http.Header
}

type apiBox struct {
	ID        string            `json:"id"`
	Name      string            `json:"name"`
	State     string            `json:"state"`
	Labels    map[string]string `json:"labels"`
	Created   time.Time         `json:"created"`
	PausedAt  *time.Time        `json:"paused_at,omitempty"`
	ActiveAt  *time.Time        `json:"active_at,omitempty"`
	DiskBytes int64             `json:"disk_bytes"`
	Idle      int64             `json:"idle_seconds"`
}

func newBoxAPI(t testing.TB, token string) *boxAPI {
	a := &boxAPI{t: t, token: token, boxes: map[string]*apiBox{}, pageSize: 2}
	a.srv = httptest.NewServer(http.HandlerFunc(a.serve))
	t.Cleanup(a.srv.Close)
	return a
}

func (a *boxAPI) URL() string { return a.srv.URL }

func (a *boxAPI) seen() []recorded {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]recorded(nil), a.requests...)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func (a *boxAPI) serve(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.requests = append(a.requests, recorded{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone()})
	if r.Header.Get("Authorization") != "Bearer "+a.token {
		writeJSON(w, 401, map[string]string{"message": "bad token"})
		return
	}
	if a.rateLimit {
		w.Header().Set("Retry-After", "7")
		writeJSON(w, 429, map[string]string{"message": "slow down"})
		return
	}
	if a.fail {
		writeJSON(w, 503, map[string]string{"message": "maintenance"})
		return
	}
	w.Header().Add("Set-Cookie", "session=abc")
	path := strings.TrimPrefix(r.URL.Path, "/v1")
	parts := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case r.Method == "GET" && path == "/boxes":
		page, _ := strconv.Atoi(r.URL.Query().Get("page"))
		if page < 1 {
			page = 1
		}
		start, end := (page-1)*a.pageSize, page*a.pageSize
		var out []*apiBox
		for i := start; i < end && i < len(a.order); i++ {
			out = append(out, a.boxes[a.order[i]])
		}
		next := ""
		if end < len(a.order) {
			next = strconv.Itoa(page + 1)
		}
		writeJSON(w, 200, map[string]any{"boxes": out, "next": next})
	case r.Method == "POST" && path == "/boxes":
		var req struct {
			Name   string            `json:"name"`
			Labels map[string]string `json:"labels"`
			Idle   int64             `json:"idle_seconds"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			writeJSON(w, 400, map[string]string{"message": err.Error()})
			return
		}
		a.seq++
		b := &apiBox{ID: fmt.Sprintf("box-%d", a.seq), Name: req.Name, State: "started", Labels: req.Labels,
			Created: time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC), DiskBytes: 10 << 30, Idle: req.Idle}
		a.boxes[b.ID] = b
		a.order = append(a.order, b.ID)
		writeJSON(w, 201, b)
	case r.Method == "GET" && len(parts) == 2 && parts[0] == "boxes" && parts[1] == "redirected" && a.redirect != "":
		http.Redirect(w, r, a.redirect, http.StatusFound)
	case len(parts) >= 2 && parts[0] == "boxes":
		b, ok := a.boxes[parts[1]]
		if !ok {
			writeJSON(w, 404, map[string]string{"message": "no such box " + parts[1]})
			return
		}
		now := time.Date(2025, 3, 2, 12, 0, 0, 0, time.UTC)
		switch {
		case r.Method == "GET" && len(parts) == 2:
			writeJSON(w, 200, b)
		case r.Method == "POST" && len(parts) == 3 && parts[2] == "pause":
			if b.State != "stopped" {
				b.State, b.PausedAt = "stopped", &now
			}
			writeJSON(w, 200, b)
		case r.Method == "POST" && len(parts) == 3 && parts[2] == "resume":
			b.State, b.PausedAt, b.ActiveAt = "started", nil, &now
			writeJSON(w, 200, b)
		case r.Method == "DELETE" && len(parts) == 2:
			delete(a.boxes, b.ID)
			for i, id := range a.order {
				if id == b.ID {
					a.order = append(a.order[:i], a.order[i+1:]...)
					break
				}
			}
			w.WriteHeader(204)
		default:
			writeJSON(w, 405, map[string]string{"message": "method not allowed"})
		}
	default:
		writeJSON(w, 404, map[string]string{"message": "no route " + r.URL.Path})
	}
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
