package cloudflare

import (
	"crypto/rand"
	"encoding/base32"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/canvasapp/companion/e2e/emulators/emulator"
)

// The WarmPool's id → container mapping (§2.4), on the emulated clock.

// newSandboxID is POST /v1/sandbox's id: 26 lowercase base32 characters
// of 16 random bytes.
func newSandboxID() string {
	var b [16]byte
	rand.Read(b[:])
	return strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b[:]))
}

// dir is a container's "/".
func (s *Server) dir(containerID string) string { return filepath.Join(s.opts.Root, containerID) }

// settleLocked puts sandbox id's container to sleep if it has been idle
// for SleepAfter: its processes and tunnels end and, unless
// SleepKeepsFiles, its files go. With files kept, the next container
// takes the old one's directory.
func (s *Server) settleLocked(id string) {
	c := s.containers[id]
	if c == nil || s.opts.SleepAfter < 0 || s.Clock().Now().Sub(c.LastActivity) < s.opts.SleepAfter {
		return
	}
	s.sleeps++
	s.dropLocked(c, !s.opts.SleepKeepsFiles)
	if s.opts.SleepKeepsFiles {
		s.keptDirs[id] = c.ID
	}
}

// dropLocked forgets c and its tunnels, and removes its files if asked.
func (s *Server) dropLocked(c *Container, files bool) {
	for _, t := range c.Tunnels {
		delete(s.tunnels, t.Hostname)
	}
	delete(s.containers, c.SandboxID)
	if files {
		os.RemoveAll(s.dir(c.ID))
	}
}

// settleAllLocked settles every container (for counts and capacity).
func (s *Server) settleAllLocked() {
	for id := range s.containers {
		s.settleLocked(id)
	}
}

// assignLocked returns sandbox id's container, starting one when it has
// none (a fresh id, an empty /workspace, no processes). ok is false when
// the pool is full.
func (s *Server) assignLocked(id string) (c *Container, ok bool) {
	s.settleLocked(id)
	now := s.Clock().Now()
	if c = s.containers[id]; c != nil {
		c.LastActivity = now
		return c, true
	}
	s.settleAllLocked()
	if s.opts.MaxInstances > 0 && len(s.containers) >= s.opts.MaxInstances {
		return nil, false
	}
	c = &Container{ID: emulator.UUID(), SandboxID: id, StartedAt: now, LastActivity: now, Tunnels: map[int]Tunnel{}}
	if old, kept := s.keptDirs[id]; kept {
		delete(s.keptDirs, id)
		os.Rename(s.dir(old), s.dir(c.ID))
	}
	os.MkdirAll(filepath.Join(s.dir(c.ID), "workspace"), 0o755)
	s.containers[id] = c
	return c, true
}

// withContainer is the bridge's middleware for /v1/sandbox/:id/*: a valid
// id, then a container from the pool (503 capacity_exceeded when full).
func (s *Server) withContainer(h func(http.ResponseWriter, *http.Request, *Container)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		if !idRE.MatchString(id) {
			fail(w, http.StatusBadRequest, "Invalid sandbox ID: must match ^[a-z2-7]{1,128}$", "invalid_request")
			return
		}
		s.mu.Lock()
		c, ok := s.assignLocked(id)
		var snap Container
		if ok {
			snap = *c
		}
		s.mu.Unlock()
		if !ok {
			fail(w, http.StatusServiceUnavailable, "No container capacity available", "capacity_exceeded")
			return
		}
		h(w, r, &snap)
	}
}

// create is POST /v1/sandbox: an id and nothing else (lazy start).
func (s *Server) create(w http.ResponseWriter, r *http.Request) {
	emulator.WriteJSON(w, http.StatusOK, map[string]string{"id": newSandboxID()})
}

// destroy is DELETE /v1/sandbox/:id: looked up without allocating; 204
// whether or not a container was there.
func (s *Server) destroy(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if !idRE.MatchString(id) {
		fail(w, http.StatusBadRequest, "Invalid sandbox ID: must match ^[a-z2-7]{1,128}$", "invalid_request")
		return
	}
	s.mu.Lock()
	s.settleLocked(id)
	if c := s.containers[id]; c != nil {
		s.destroyed[id]++
		s.dropLocked(c, true)
	}
	delete(s.keptDirs, id)
	s.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

// running is GET /v1/sandbox/:id/running: exec('true') in the container
// the middleware just assigned.
func (s *Server) running(w http.ResponseWriter, r *http.Request, c *Container) {
	emulator.WriteJSON(w, http.StatusOK, map[string]bool{"running": true})
}

// stats is GET /v1/pool/stats.
func (s *Server) stats(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.settleAllLocked()
	n := len(s.containers)
	s.mu.Unlock()
	emulator.WriteJSON(w, http.StatusOK, map[string]any{"warm": 0, "assigned": n, "total": n,
		"config": map[string]int{"warmTarget": 0, "refreshInterval": 10000}, "maxInstances": s.opts.MaxInstances})
}

// Container returns sandbox id's current container, after settling its
// sleep; it neither assigns one nor counts as activity.
func (s *Server) Container(id string) (Container, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.settleLocked(id)
	c := s.containers[id]
	if c == nil {
		return Container{}, false
	}
	return *c, true
}

// ContainerByID finds a live container by its own id.
func (s *Server) ContainerByID(cid string) (Container, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.containers {
		if c.ID == cid {
			return *c, true
		}
	}
	return Container{}, false
}

// Dir is the directory standing for container cid's "/".
func (s *Server) Dir(cid string) string { return s.dir(cid) }

// Sleeps counts the containers that slept so far.
func (s *Server) Sleeps() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.settleAllLocked()
	return s.sleeps
}

// Destroyed counts the destroys that found a live container for id.
func (s *Server) Destroyed(id string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.destroyed[id]
}

// touchLocked records activity on sandbox id's container.
func (s *Server) touchLocked(id string) {
	if c := s.containers[id]; c != nil {
		c.LastActivity = s.Clock().Now()
	}
}

// Containers returns every live container by sandbox id, after settling
// sleeps; it assigns none and counts as no activity.
func (s *Server) Containers() map[string]Container {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.settleAllLocked()
	out := make(map[string]Container, len(s.containers))
	for id, c := range s.containers {
		out[id] = *c
	}
	return out
}

// SetSleepKeepsFiles switches between the two readings of a sleep
// (Options.SleepKeepsFiles) for the sleeps still to come.
func (s *Server) SetSleepKeepsFiles(keep bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.opts.SleepKeepsFiles = keep
}
