package uibridge

import (
	"encoding/json"
	"time"

	"github.com/canvasapp/companion/core"
)

// AccountStatus is how companion's last look at an account's provider went.
type AccountStatus struct {
	// State is "checking" (just added, first list still running), "ok"
	// or "failing" (backing off until next_attempt_at).
	State         string     `json:"state"`
	ErrorCode     string     `json:"error_code,omitempty"`
	Message       string     `json:"message,omitempty"`
	LastOKAt      *time.Time `json:"last_ok_at"`
	NextAttemptAt *time.Time `json:"next_attempt_at"`
}

// AccountFlag is a problem with an account that needs a person, such as
// "inventing_boxes".
type AccountFlag struct {
	Code    string    `json:"code"`
	Message string    `json:"message"`
	Since   time.Time `json:"since"`
}

// accountEventBuffer is how many account events may wait for the hub;
// beyond that some are dropped (GET /v1/accounts stays authoritative).
const accountEventBuffer = 256

// followAccounts queues an "account" frame for every client of the
// account's owner whenever its status or flag changes, until the hub
// stops. Account frames sit outside the revision sequence: a reconnecting
// client re-reads GET /v1/accounts instead of catching up on them.
func (h *hub) followAccounts(svc *core.Service) {
	events, stop := svc.SubscribeAccounts(accountEventBuffer)
	defer stop()
	for {
		select {
		case <-h.stop:
			return
		case ev := <-events:
			fr := &frame{event: true, pm: prepare(accountFrame(h.now(), toWireAccount(ev.Account, ev.Status)))}
			h.mu.Lock()
			for c := range h.clients[ev.Account.Owner] {
				if ok, overflow := c.push(fr, h.queueLimit); !ok {
					h.removeLocked(c)
					if overflow {
						h.overflows.Add(1)
					}
				}
			}
			h.mu.Unlock()
		}
	}
}

func accountFrame(now time.Time, a Account) []byte {
	b, err := json.Marshal(struct {
		Type       string    `json:"type"`
		ServerTime time.Time `json:"server_time"`
		Account    Account   `json:"account"`
	}{"account", wireTime(now), a})
	if err != nil {
		panic("uibridge: encoding an account event: " + err.Error())
	}
	return b
}

// pushAgent queues an "agent" frame (a workspace's open agent
// connections) for every client of owner. Like account frames, it sits
// outside the revision sequence; a client that (re)connects is sent the
// counts open at that time after its snapshot (pushAgentCounts).
func (h *hub) pushAgent(owner, id string, n int) {
	fr := &frame{event: true, pm: prepare(agentFrame(h.now(), id, n))}
	h.mu.Lock()
	defer h.mu.Unlock()
	for c := range h.clients[owner] {
		if ok, overflow := c.push(fr, h.queueLimit); !ok {
			h.removeLocked(c)
			if overflow {
				h.overflows.Add(1)
			}
		}
	}
}
