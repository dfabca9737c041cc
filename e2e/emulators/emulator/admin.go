package emulator

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"time"
)

// AdminMux returns a mux with the shared admin routes registered:
//
//	GET    /_emulator/           index of admin routes
//	GET    /_emulator/clock      {"now","frozen"}
//	POST   /_emulator/clock      {"advance":"90s"} or {"set":"2026-01-02T15:04:05Z"}
//	GET    /_emulator/faults     queued faults with remaining counts
//	POST   /_emulator/faults     one Fault object or an array of them
//	DELETE /_emulator/faults     drop queued faults, end current hangs
//	GET    /_emulator/requests   request log (?method=GET&contains=ID filter)
//	DELETE /_emulator/requests   forget the log
//
// Provider packages register their own routes (state, seed, …) on the
// returned mux through Handle so they show up in the index.
func (b *Base) AdminMux() *AdminRoutes {
	a := &AdminRoutes{mux: http.NewServeMux()}
	a.Handle("GET "+AdminPrefix+"{$}", "this index", a.index)
	a.Handle("GET "+AdminPrefix+"clock", "current emulated time", b.getClock)
	a.Handle("POST "+AdminPrefix+"clock", `move the clock: {"advance":"90s"} or {"set":"RFC 3339 time"}`, b.postClock)
	a.Handle("GET "+AdminPrefix+"faults", "queued faults", b.getFaults)
	a.Handle("POST "+AdminPrefix+"faults", `queue faults: {"kind":"rate_limit|status|hang|redirect","count":N,...} or an array`, b.postFaults)
	a.Handle("DELETE "+AdminPrefix+"faults", "drop queued faults and end hangs", b.deleteFaults)
	a.Handle("GET "+AdminPrefix+"requests", "request log; ?method= and ?contains= filter", b.getRequests)
	a.Handle("DELETE "+AdminPrefix+"requests", "forget the request log", b.deleteRequests)
	return a
}

// AdminRoutes is the admin mux plus a description of each route.
type AdminRoutes struct {
	mux    *http.ServeMux
	routes map[string]string
}

// Handle registers an admin route; pattern is a net/http mux pattern with a
// method, under AdminPrefix.
func (a *AdminRoutes) Handle(pattern, about string, h http.HandlerFunc) {
	if a.routes == nil {
		a.routes = map[string]string{}
	}
	a.routes[pattern] = about
	a.mux.HandleFunc(pattern, h)
}

// ServeHTTP serves the admin routes; unknown ones get a JSON 404.
func (a *AdminRoutes) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if _, pattern := a.mux.Handler(r); pattern == "" {
		AdminError(w, http.StatusNotFound, fmt.Errorf("no admin route %s %s; GET %s lists them", r.Method, r.URL.Path, AdminPrefix))
		return
	}
	a.mux.ServeHTTP(w, r)
}

func (a *AdminRoutes) index(w http.ResponseWriter, r *http.Request) {
	keys := make([]string, 0, len(a.routes))
	for k := range a.routes {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	type route struct {
		Route string `json:"route"`
		About string `json:"about"`
	}
	out := make([]route, 0, len(keys))
	for _, k := range keys {
		out = append(out, route{k, a.routes[k]})
	}
	WriteJSON(w, http.StatusOK, out)
}

// AdminError writes {"error": err} with status.
func AdminError(w http.ResponseWriter, status int, err error) {
	WriteJSON(w, status, map[string]string{"error": err.Error()})
}

func (b *Base) clockBody() map[string]any {
	return map[string]any{"now": b.clock.Now().Format(time.RFC3339Nano), "frozen": b.clock.Frozen()}
}

func (b *Base) getClock(w http.ResponseWriter, r *http.Request) {
	WriteJSON(w, http.StatusOK, b.clockBody())
}

func (b *Base) postClock(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Advance json.RawMessage `json:"advance"`
		Set     string          `json:"set"`
	}
	if err := DecodeJSON(r, &body); err != nil {
		AdminError(w, http.StatusBadRequest, err)
		return
	}
	switch {
	case body.Set != "" && len(body.Advance) > 0:
		AdminError(w, http.StatusBadRequest, errors.New("give advance or set, not both"))
		return
	case body.Set != "":
		t, err := time.Parse(time.RFC3339Nano, body.Set)
		if err != nil {
			AdminError(w, http.StatusBadRequest, fmt.Errorf("set: %w", err))
			return
		}
		b.clock.Set(t)
	case len(body.Advance) > 0:
		d, err := ParseDuration(body.Advance)
		if err != nil {
			AdminError(w, http.StatusBadRequest, fmt.Errorf("advance: %w", err))
			return
		}
		b.clock.Advance(d)
	default:
		AdminError(w, http.StatusBadRequest, errors.New("give advance or set"))
		return
	}
	WriteJSON(w, http.StatusOK, b.clockBody())
}

func (b *Base) getFaults(w http.ResponseWriter, r *http.Request) {
	WriteJSON(w, http.StatusOK, b.faults.Pending())
}

func (b *Base) postFaults(w http.ResponseWriter, r *http.Request) {
	var raw json.RawMessage
	if err := DecodeJSON(r, &raw); err != nil {
		AdminError(w, http.StatusBadRequest, err)
		return
	}
	var list []Fault
	if len(raw) > 0 && raw[0] == '[' {
		if err := json.Unmarshal(raw, &list); err != nil {
			AdminError(w, http.StatusBadRequest, err)
			return
		}
	} else {
		var f Fault
		if err := json.Unmarshal(raw, &f); err != nil {
			AdminError(w, http.StatusBadRequest, err)
			return
		}
		list = []Fault{f}
	}
	for _, f := range list {
		if err := f.validate(); err != nil {
			AdminError(w, http.StatusBadRequest, err)
			return
		}
	}
	for _, f := range list {
		b.faults.Add(f) // validated above
	}
	WriteJSON(w, http.StatusCreated, b.faults.Pending())
}

func (b *Base) deleteFaults(w http.ResponseWriter, r *http.Request) {
	b.faults.Clear()
	w.WriteHeader(http.StatusNoContent)
}

func (b *Base) getRequests(w http.ResponseWriter, r *http.Request) {
	reqs := b.log.Matching(r.URL.Query().Get("method"), r.URL.Query().Get("contains"))
	if reqs == nil {
		reqs = []Request{}
	}
	WriteJSON(w, http.StatusOK, reqs)
}

func (b *Base) deleteRequests(w http.ResponseWriter, r *http.Request) {
	b.log.Reset()
	w.WriteHeader(http.StatusNoContent)
}
