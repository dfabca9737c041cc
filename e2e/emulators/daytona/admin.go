package daytona

import (
	"fmt"
	"net/http"

	"github.com/canvasapp/companion/e2e/emulators/emulator"
)

// adminRoutes adds the Daytona-specific admin routes to the shared ones:
//
//	GET  /_emulator/state                      every live sandbox
//	POST /_emulator/seed                       SeedSandbox JSON → 201 Sandbox
//	POST /_emulator/sandboxes/{id}/activity    toolbox-style activity (Touch)
//	GET  /_emulator/sandboxes/{id}/endpoint    preview URL and token of ?port= (default 8000)
func (s *Server) adminRoutes() http.Handler {
	a := s.AdminMux()
	a.Handle("GET "+emulator.AdminPrefix+"state", "every live sandbox", func(w http.ResponseWriter, r *http.Request) {
		emulator.WriteJSON(w, http.StatusOK, s.Sandboxes())
	})
	a.Handle("POST "+emulator.AdminPrefix+"seed", "add a sandbox directly (SeedSandbox JSON)", func(w http.ResponseWriter, r *http.Request) {
		var sd SeedSandbox
		if err := emulator.DecodeJSON(r, &sd); err != nil {
			emulator.AdminError(w, http.StatusBadRequest, err)
			return
		}
		sb, err := s.trySeed(sd)
		if err != nil {
			emulator.AdminError(w, http.StatusBadRequest, err)
			return
		}
		emulator.WriteJSON(w, http.StatusCreated, sb)
	})
	a.Handle("POST "+emulator.AdminPrefix+"sandboxes/{id}/activity", "record toolbox activity (resets auto-stop)", func(w http.ResponseWriter, r *http.Request) {
		if !s.Touch(r.PathValue("id")) {
			emulator.AdminError(w, http.StatusNotFound, fmt.Errorf("no sandbox %q", r.PathValue("id")))
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	a.Handle("GET "+emulator.AdminPrefix+"sandboxes/{id}/endpoint", "preview URL and token of ?port= (default 8000)", func(w http.ResponseWriter, r *http.Request) {
		port, err := emulator.PortParam(r)
		if err != nil {
			emulator.AdminError(w, http.StatusBadRequest, err)
			return
		}
		ep, err := s.Endpoint(r.PathValue("id"), port)
		if err != nil {
			emulator.AdminError(w, http.StatusNotFound, err)
			return
		}
		emulator.WriteJSON(w, http.StatusOK, ep)
	})
	return a
}

// trySeed turns Seed's panics on bad input into errors for the admin route.
func (s *Server) trySeed(sd SeedSandbox) (sb Sandbox, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%v", p)
		}
	}()
	return s.Seed(sd), nil
}
