// Command barehub is the baseline for companion's stream benchmarks: a
// plain gorilla/websocket hub doing the same work as companion's stream
// with nothing else (no store, no gate beyond the subprotocol). It sends
// every client the same snapshot bytes companion sent (read from a file
// holding companion's GET /v1/workspaces answer), encoded and framed once,
// and on POST /broadcast one upsert of the same size to every client.
//
// It prints a ready line on stdout like companion desktop and exits when
// stdin closes.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

type hub struct {
	mu       sync.Mutex
	rev      int64
	clients  map[*client]struct{}
	snapshot *websocket.PreparedMessage
	sample   json.RawMessage // one workspace, sent in every upsert
}

type client struct {
	conn *websocket.Conn
	send chan *websocket.PreparedMessage
}

func main() {
	if len(os.Args) != 2 {
		log.Fatal("usage: barehub WORKSPACES_JSON_FILE")
	}
	h, err := load(os.Args[1])
	if err != nil {
		log.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	up := websocket.Upgrader{
		ReadBufferSize:    1024,
		WriteBufferPool:   &sync.Pool{},
		Subprotocols:      []string{"companion.v1"},
		EnableCompression: true, // used only when the client offers it
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/ws", func(w http.ResponseWriter, r *http.Request) {
		c, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		h.serve(c)
	})
	mux.HandleFunc("POST /broadcast", func(w http.ResponseWriter, r *http.Request) {
		rev := h.broadcast()
		fmt.Fprintf(w, `{"workspace":{"rev":%d}}`, rev)
	})
	go http.Serve(ln, mux)
	json.NewEncoder(os.Stdout).Encode(map[string]string{"event": "ready", "url": "http://" + ln.Addr().String(), "token": "bare"})
	io.Copy(io.Discard, os.Stdin)
}

// load prepares the snapshot message from companion's list answer.
func load(path string) (*hub, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var list struct {
		Rev        int64             `json:"rev"`
		ServerTime string            `json:"server_time"`
		Workspaces []json.RawMessage `json:"workspaces"`
	}
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(list.Workspaces) == 0 {
		return nil, fmt.Errorf("%s: no workspaces to take an upsert from", path)
	}
	// Fields in companion's order: clients parse the type and rev from a
	// message's head.
	msg, err := json.Marshal(struct {
		Type       string            `json:"type"`
		Rev        int64             `json:"rev"`
		ServerTime string            `json:"server_time"`
		Workspaces []json.RawMessage `json:"workspaces"`
	}{"snapshot", list.Rev, list.ServerTime, list.Workspaces})
	if err != nil {
		return nil, err
	}
	pm, err := websocket.NewPreparedMessage(websocket.TextMessage, msg)
	if err != nil {
		return nil, err
	}
	return &hub{rev: list.Rev, clients: map[*client]struct{}{}, snapshot: pm, sample: list.Workspaces[0]}, nil
}

func (h *hub) serve(conn *websocket.Conn) {
	c := &client{conn: conn, send: make(chan *websocket.PreparedMessage, 16)}
	h.mu.Lock()
	h.clients[c] = struct{}{}
	h.mu.Unlock()
	c.send <- h.snapshot
	go c.write()
	conn.SetReadLimit(4096)
	for {
		if _, _, err := conn.NextReader(); err != nil {
			break
		}
	}
	h.mu.Lock()
	delete(h.clients, c)
	h.mu.Unlock()
	close(c.send)
}

func (c *client) write() {
	defer c.conn.Close()
	for m := range c.send {
		c.conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
		if err := c.conn.WritePreparedMessage(m); err != nil {
			return
		}
	}
}

// broadcast sends one upsert, encoded once, to every client; a client
// whose queue is full is dropped (companion's slow-consumer rule).
func (h *hub) broadcast() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.rev++
	msg := []byte(`{"type":"upsert","rev":` + strconv.FormatInt(h.rev, 10) +
		`,"server_time":"` + time.Now().UTC().Format("2006-01-02T15:04:05.999Z07:00") + `","workspace":`)
	msg = append(append(msg, h.sample...), '}')
	pm, err := websocket.NewPreparedMessage(websocket.TextMessage, msg)
	if err != nil {
		log.Fatal(err)
	}
	for c := range h.clients {
		select {
		case c.send <- pm:
		default:
			c.conn.Close()
		}
	}
	return h.rev
}
