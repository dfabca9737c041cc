package uibridge

import (
	"context"
	"net/http"

	"github.com/canvasapp/companion/core"
)

// Admin routes for users (serve mode with sign-in). The CLI does the same
// on the server; these let an admin do it from the web front end.

func (s *Server) userRoutes(rt *router) {
	rt.handle("GET /v1/users", adminOnly(s.listUsers))
	rt.handle("POST /v1/users", adminOnly(s.addUser))
	rt.handle("DELETE /v1/users/{id}", adminOnly(s.removeUser))
}

func (s *Server) listUsers(w http.ResponseWriter, r *http.Request) {
	list, err := s.cfg.Login.Auth.ListUsers(r.Context())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := make([]User, 0, len(list))
	for _, u := range list {
		out = append(out, User{ID: u.ID, Name: u.Name, Issuer: u.Issuer, Admin: u.Admin})
	}
	writeJSON(w, http.StatusOK, map[string]any{"users": out})
}

type addUserBody struct {
	Name     string `json:"name"`
	Password string `json:"password"`
	Admin    bool   `json:"admin"`
}

func (s *Server) addUser(w http.ResponseWriter, r *http.Request) {
	var body addUserBody
	if !s.decodeBody(w, r, &body, false) {
		return
	}
	u, err := s.cfg.Login.Auth.AddLocalUser(r.Context(), body.Name, body.Password, body.Admin)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	w.Header().Set("Location", "/v1/users/"+u.ID)
	writeJSON(w, http.StatusCreated, map[string]any{"user": User{ID: u.ID, Name: u.Name, Issuer: u.Issuer, Admin: u.Admin}})
}

func (s *Server) removeUser(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if id == owner(r) {
		writeErrorCode(w, http.StatusConflict, string(core.KindConflict), "you cannot remove yourself; another admin can")
		return
	}
	if err := s.cfg.Login.Auth.RemoveUser(r.Context(), id); err != nil {
		s.writeError(w, r, err)
		return
	}
	s.hub.closeOwner(id, nil, CloseUserRemoved, "your user was removed")
	if after := s.cfg.Login.UserRemoved; after != nil {
		if err := after(context.WithoutCancel(r.Context())); err != nil {
			s.log.Warn("the removed user's things stay unowned until the next start", "user", id, "err", err)
		}
	}
	w.WriteHeader(http.StatusNoContent)
}
