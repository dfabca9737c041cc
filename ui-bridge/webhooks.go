package uibridge

import (
	"html/template"
	"net/http"
	"strconv"
	"time"

	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/webhooks"
)

// Webhooks are a serve feature (Config.Webhooks); the desktop, which may
// be closed when anything happens, has no routes for them.
func (s *Server) webhookRoutes(rt *router) {
	if s.cfg.Webhooks == nil {
		return
	}
	rt.handle("GET /v1/webhooks", s.listWebhooks)
	rt.handle("POST /v1/webhooks", s.createWebhook)
	rt.handle("DELETE /v1/webhooks/{id}", s.deleteWebhook)
	rt.handle("POST /v1/webhooks/{id}/rotate-secret", s.rotateWebhookSecret)
	rt.handle("GET /v1/webhooks/{id}/deliveries", s.listDeliveries)
	rt.handle("GET "+webhooks.KeepPath+"{token}", s.keepLinkPage)
	rt.handle("POST "+webhooks.KeepPath+"{token}", s.keepLink)
}

// Webhook is a webhook as its owner sees it; its secret is only in the
// answer that created it.
type Webhook struct {
	ID        string    `json:"id"`
	URL       string    `json:"url"`
	Events    []string  `json:"events"`
	AccountID *string   `json:"account_id"`
	CreatedAt time.Time `json:"created_at"`
	// PreviousSecretExpiresAt is when the secret the last rotation
	// replaced stops signing deliveries; null: none does.
	PreviousSecretExpiresAt *time.Time `json:"previous_secret_expires_at"`
}

func toWireWebhook(h webhooks.Hook) Webhook {
	out := Webhook{ID: h.ID, URL: h.URL, Events: h.Events, CreatedAt: h.CreatedAt}
	if !h.PreviousSecretUntil.IsZero() {
		t := h.PreviousSecretUntil
		out.PreviousSecretExpiresAt = &t
	}
	if out.Events == nil {
		out.Events = []string{}
	}
	if h.AccountID != "" {
		a := h.AccountID
		out.AccountID = &a
	}
	return out
}

// WebhookDelivery is one event for one webhook, as the outbox has it.
type WebhookDelivery struct {
	ID          string     `json:"id"`
	EventID     string     `json:"event_id"`
	Event       string     `json:"event"`
	State       string     `json:"state"`
	Attempts    int        `json:"attempts"`
	LastStatus  *int       `json:"last_status"`
	LastError   *string    `json:"last_error"`
	NextAttempt *time.Time `json:"next_attempt_at"`
	DeliveredAt *time.Time `json:"delivered_at"`
	CreatedAt   time.Time  `json:"created_at"`
}

func toWireDelivery(d webhooks.Delivery) WebhookDelivery {
	out := WebhookDelivery{ID: d.ID, EventID: d.EventID, Event: d.Event, State: d.State, Attempts: d.Attempts, CreatedAt: d.CreatedAt}
	if d.LastStatus != 0 {
		st := d.LastStatus
		out.LastStatus = &st
	}
	if d.LastError != "" {
		e := d.LastError
		out.LastError = &e
	}
	if d.State == webhooks.StatePending {
		n := d.NextAt
		out.NextAttempt = &n
	}
	if !d.DeliveredAt.IsZero() {
		t := d.DeliveredAt
		out.DeliveredAt = &t
	}
	return out
}

func (s *Server) listWebhooks(w http.ResponseWriter, r *http.Request) {
	list, err := s.cfg.Webhooks.List(r.Context(), owner(r))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := make([]Webhook, 0, len(list))
	for _, h := range list {
		out = append(out, toWireWebhook(h))
	}
	writeJSON(w, http.StatusOK, map[string]any{"webhooks": out})
}

type createWebhookBody struct {
	URL       string   `json:"url"`
	Events    []string `json:"events"`
	AccountID string   `json:"account_id"`
}

func (s *Server) createWebhook(w http.ResponseWriter, r *http.Request) {
	var body createWebhookBody
	if !s.decodeBody(w, r, &body, false) {
		return
	}
	h, secret, err := s.cfg.Webhooks.Create(r.Context(), owner(r), webhooks.CreateRequest{URL: body.URL, Events: body.Events, AccountID: body.AccountID})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	w.Header().Set("Location", "/v1/webhooks/"+h.ID)
	writeJSON(w, http.StatusCreated, map[string]any{"webhook": toWireWebhook(h), "secret": secret})
}

func (s *Server) deleteWebhook(w http.ResponseWriter, r *http.Request) {
	if err := s.cfg.Webhooks.Delete(r.Context(), owner(r), r.PathValue("id")); err != nil {
		s.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

type rotateSecretBody struct {
	// PreviousValidFor is in seconds; nil: the default grace period.
	PreviousValidFor *int64 `json:"previous_valid_for"`
}

// rotateWebhookSecret gives a webhook a new secret, shown this once, and
// keeps the old one signing too for a grace period.
func (s *Server) rotateWebhookSecret(w http.ResponseWriter, r *http.Request) {
	var body rotateSecretBody
	if !s.decodeBody(w, r, &body, true) {
		return
	}
	grace := webhooks.DefaultPreviousValidFor
	if v := body.PreviousValidFor; v != nil {
		// Checked here in seconds: a huge number would overflow a Duration.
		if maxSec := int64(webhooks.MaxPreviousValidFor / time.Second); *v < 0 || *v > maxSec {
			writeErrorCode(w, http.StatusBadRequest, string(core.KindInvalid),
				"previous_valid_for must be a number of seconds from 0 (stop the old secret at once) to "+strconv.FormatInt(maxSec, 10)+" (7 days)")
			return
		}
		grace = time.Duration(*v) * time.Second
	}
	h, secret, err := s.cfg.Webhooks.Rotate(r.Context(), owner(r), r.PathValue("id"), grace)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"webhook": toWireWebhook(h), "secret": secret})
}

func (s *Server) listDeliveries(w http.ResponseWriter, r *http.Request) {
	limit := 100
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 500 {
			writeErrorCode(w, http.StatusBadRequest, string(core.KindInvalid), "limit must be a number from 1 to 500")
			return
		}
		limit = n
	}
	list, err := s.cfg.Webhooks.Deliveries(r.Context(), owner(r), r.PathValue("id"), limit)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := make([]WebhookDelivery, 0, len(list))
	for _, d := range list {
		out = append(out, toWireDelivery(d))
	}
	writeJSON(w, http.StatusOK, map[string]any{"deliveries": out})
}

// keepLinkPage answers a keep link opened in a browser (or fetched by a
// link preview) with a page whose button posts it: a GET changes nothing.
func (s *Server) keepLinkPage(w http.ResponseWriter, r *http.Request) {
	l, err := s.cfg.Webhooks.CheckKeepLink(r.Context(), r.PathValue("token"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Content-Security-Policy", "default-src 'none'; form-action 'self'")
	keepPage.Execute(w, map[string]any{"Workspace": l.WorkspaceID, "DeleteAfter": l.DeleteAfter.Format(time.RFC1123)})
}

var keepPage = template.Must(template.New("keep").Parse(`<!doctype html>
<meta charset="utf-8"><meta name="viewport" content="width=device-width"><title>Keep workspace</title>
<p>Workspace <code>{{.Workspace}}</code> is scheduled for deletion at {{.DeleteAfter}}.
<form method="post"><button>Keep it</button></form>
<p>Keeping it only cancels this scheduled deletion; you can change it later in companion.`))

// keepLink keeps the workspace a retention warning's link names.
func (s *Server) keepLink(w http.ResponseWriter, r *http.Request) {
	ws, err := s.cfg.Webhooks.Keep(r.Context(), r.PathValue("token"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, map[string]any{"kept": true, "workspace_id": ws.ID, "keep": ws.Keep})
}
