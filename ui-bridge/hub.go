package uibridge

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"

	"github.com/canvasapp/companion/core"
)

// The hub is the stream's engine. It is the server's one subscriber to the
// core feed: it encodes each change once, keeps the encoded wire form of
// every live workspace (so a snapshot is a concatenation, not 10,000
// encodings), and hands the same encoded bytes to every client that may see
// them. Clients hold references, never copies.
//
// Ordering: the hub applies changes in revision order under mu, and a
// client is attached under mu too, so a client attached at revision R
// receives exactly the changes after R.
type hub struct {
	feed       *core.Feed
	log        *slog.Logger
	now        func() time.Time
	queueLimit int
	feedBuffer int

	mu       sync.Mutex
	rev      int64
	entries  map[string]*entry
	clients  map[string]map[*client]struct{} // by owner
	advanced chan struct{}                   // closed and replaced when rev moves
	closed   bool
	snaps    map[snapKey]*snapshot // all at rev, dropped when it moves

	stop chan struct{}
	done chan struct{}

	overflows     atomic.Int64 // clients dropped because their queue was full
	snapEncodings atomic.Int64 // snapshots encoded (each may serve many clients)
}

// entry is a live workspace's encoded wire forms (an object for messages
// and object snapshots, a row for table snapshots) and what the hub needs
// to filter and order it without decoding.
type entry struct {
	id      string
	owner   string
	created time.Time
	json    []byte
	row     []byte
}

// snapKey names one shared snapshot: an owner's workspaces in one form.
type snapKey struct {
	owner string
	table bool
}

// frame is one encoded stream message, prepared once (framed, and
// compressed on demand) for every client it is queued for.
type frame struct {
	rev int64
	pm  *websocket.PreparedMessage
	// event marks a frame outside the revision sequence (an account
	// event): written as it comes, never skipped, never moves "last".
	event bool
}

var errHubClosed = errors.New("the stream is shutting down")

func newHub(feed *core.Feed, log *slog.Logger, now func() time.Time, queueLimit, feedBuffer int) *hub {
	h := &hub{
		feed:       feed,
		log:        log,
		now:        now,
		queueLimit: queueLimit,
		feedBuffer: feedBuffer,
		entries:    map[string]*entry{},
		clients:    map[string]map[*client]struct{}{},
		snaps:      map[snapKey]*snapshot{},
		advanced:   make(chan struct{}),
		stop:       make(chan struct{}),
		done:       make(chan struct{}),
	}
	rev, list, sub := feed.SubscribeSnapshot(feedBuffer)
	h.load(rev, list)
	go h.run(sub)
	return h
}

// load replaces the cache with a snapshot. The caller holds mu or owns h
// exclusively.
func (h *hub) load(rev int64, list []core.Workspace) {
	h.rev = rev
	h.entries = make(map[string]*entry, len(list))
	for _, e := range newEntries(list) {
		h.entries[e.id] = e
	}
}

// entryChunk is the fewest workspaces one goroutine of newEntries encodes.
const entryChunk = 1024

// newEntries encodes list's workspaces on every CPU: at start-up the hub
// encodes them all before companion answers its first request (about
// 110 ms at 10,000 workspaces on one core of the 2-core test machine).
func newEntries(list []core.Workspace) []*entry {
	out := make([]*entry, len(list))
	chunk := max(entryChunk, (len(list)+runtime.GOMAXPROCS(0)-1)/runtime.GOMAXPROCS(0))
	var wg sync.WaitGroup
	for from := 0; from < len(list); from += chunk {
		to := min(from+chunk, len(list))
		wg.Go(func() {
			for i := from; i < to; i++ {
				out[i] = newEntry(list[i])
			}
		})
	}
	wg.Wait()
	return out
}

func newEntry(ws core.Workspace) *entry {
	w := toWireWorkspace(ws)
	return &entry{id: ws.ID, owner: ws.Owner, created: ws.CreatedAt, json: encodeWire(&w), row: encodeRow(&w)}
}

func (h *hub) run(sub *core.Subscription) {
	defer close(h.done)
	for {
		select {
		case <-h.stop:
			sub.Close()
			return
		case ch, ok := <-sub.C:
			if ok {
				h.apply(*ch)
				continue
			}
			h.log.Warn("stream fell behind the change feed; resubscribing", "rev", h.currentRev(), "err", sub.Err())
			if sub = h.resubscribe(); sub == nil {
				return
			}
		}
	}
}

// resubscribe continues after the hub's subscription was dropped. When the
// store can no longer account for the missed revisions, the cache is
// reloaded and every client is told to reconnect. It returns nil when the
// hub is stopping.
func (h *hub) resubscribe() *core.Subscription {
	wait := 50 * time.Millisecond
	for {
		changes, _, complete, sub, err := h.feed.SubscribeSince(context.Background(), h.currentRev(), h.feedBuffer)
		if err == nil && complete {
			for _, ch := range changes {
				h.apply(ch)
			}
			return sub
		}
		if err == nil {
			rev, list, sub := h.feed.SubscribeSnapshot(h.feedBuffer)
			h.mu.Lock()
			h.load(rev, list)
			h.killAllLocked(CloseResync, "stream reset: reconnect")
			h.advanceLocked()
			h.mu.Unlock()
			return sub
		}
		h.log.Error("stream could not resubscribe to the change feed", "err", err, "retry_in", wait)
		select {
		case <-h.stop:
			return nil
		case <-time.After(wait):
			wait = min(2*wait, 5*time.Second)
		}
	}
}

// apply records one change and queues it for every client of its owner.
func (h *hub) apply(ch core.Change) {
	ws := ch.Workspace
	now := h.now()
	var fr *frame
	var e *entry
	if ws.Removed {
		fr = &frame{rev: ch.Rev, pm: prepare(removeFrame(ch.Rev, now, ws.ID))}
	} else {
		e = newEntry(ws)
		fr = &frame{rev: ch.Rev, pm: prepare(upsertFrame(ch.Rev, now, e.json))}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if ch.Rev <= h.rev {
		return // already applied before a resubscription
	}
	h.rev = ch.Rev
	if e != nil {
		h.entries[ws.ID] = e
	} else {
		delete(h.entries, ws.ID)
	}
	for c := range h.clients[ws.Owner] {
		if ok, overflow := c.push(fr, h.queueLimit); !ok {
			h.removeLocked(c)
			if overflow {
				h.overflows.Add(1)
			}
		}
	}
	h.advanceLocked()
}

func (h *hub) advanceLocked() {
	clear(h.snaps) // none of them is current any more
	close(h.advanced)
	h.advanced = make(chan struct{})
}

func (h *hub) currentRev() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.rev
}

// waitFor waits until the hub has applied revision rev, or ctx ends.
func (h *hub) waitFor(ctx context.Context, rev int64) {
	for {
		h.mu.Lock()
		cur, ch := h.rev, h.advanced
		h.mu.Unlock()
		if cur >= rev {
			return
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return
		}
	}
}

// waitForTimeout is waitFor bounded by d.
func (h *hub) waitForTimeout(rev int64, d time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	h.waitFor(ctx, rev)
}

// list returns the revision and owner's live workspaces, newest first.
func (h *hub) list(owner string) (int64, []*entry) {
	h.mu.Lock()
	rev := h.rev
	items := make([]*entry, 0, len(h.entries))
	for _, e := range h.entries {
		if e.owner == owner {
			items = append(items, e)
		}
	}
	h.mu.Unlock()
	sortEntries(items)
	return rev, items
}

// sortEntries orders like core.Service.Workspaces: newest first, then by id.
func sortEntries(items []*entry) {
	slices.SortFunc(items, func(a, b *entry) int {
		if c := b.created.Compare(a.created); c != 0 {
			return c
		}
		return strings.Compare(a.id, b.id)
	})
}

// attachSnapshot attaches c at the current revision and returns the
// snapshot of c's owner's workspaces as of it, in c's form. Clients of one
// owner that ask for the same form and connect at the same revision,
// within snapshotReuse of each other, share one snapshot: it is encoded
// and prepared once for all of them.
func (h *hub) attachSnapshot(c *client) (*snapshot, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, errHubClosed
	}
	now := h.now()
	key := snapKey{owner: c.owner, table: c.table}
	snap := h.snaps[key]
	if snap == nil || snap.rev != h.rev || now.Sub(snap.at) >= snapshotReuse || now.Before(snap.at) {
		items := make([]*entry, 0, len(h.entries))
		for _, e := range h.entries {
			if e.owner == c.owner {
				items = append(items, e)
			}
		}
		snap = &snapshot{rev: h.rev, at: now, table: c.table, items: items, encodings: &h.snapEncodings}
		h.snaps[key] = snap
	}
	h.addLocked(c)
	return snap, nil
}

// attachSince attaches c so that it receives every change after since.
// It returns the frames that bring c from since up to the point where the
// live stream takes over; ok is false when since cannot be caught up (too
// old or from the future; the catch-up is bounded by the live workspaces
// plus the tombstones the store keeps),
// and then c is not attached.
func (h *hub) attachSince(ctx context.Context, c *client, since int64) (catchup []*frame, ok bool, err error) {
	// Fast path: since is at or just ahead of the hub (a client that read
	// a revision from GET /v1/workspaces before the hub applied it). The
	// frames up to since will arrive live and are skipped.
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil, false, errHubClosed
	}
	// A since beyond the feed may come from another replica's write that
	// this one has not applied yet: the slow path reads the store, which
	// knows, and answers "from the future" only when the store does too.
	if since == h.rev || (since > h.rev && since <= h.feed.Rev()) {
		c.skip = since
		h.addLocked(c)
		h.mu.Unlock()
		return nil, true, nil
	}
	h.mu.Unlock()

	// The missed changes come from the store, through the feed. The hub
	// may move on between that read and the attach; then read again.
	for range 3 {
		changes, feedRev, complete, sub, err := h.feed.SubscribeSince(ctx, since, 1)
		if err != nil {
			return nil, false, err
		}
		if !complete {
			return nil, false, nil
		}
		sub.Close() // only the atomic read is wanted; the hub is the live source
		now := h.now()
		frames := make([]*frame, 0, len(changes))
		for _, ch := range changes {
			ws := ch.Workspace
			if ws.Owner != c.owner {
				continue
			}
			if ws.Removed {
				frames = append(frames, &frame{rev: ch.Rev, pm: prepare(removeFrame(ch.Rev, now, ws.ID))})
			} else {
				frames = append(frames, &frame{rev: ch.Rev, pm: prepare(upsertFrame(ch.Rev, now, encodeWorkspace(ws)))})
			}
		}
		h.mu.Lock()
		switch {
		case h.closed:
			h.mu.Unlock()
			return nil, false, errHubClosed
		case h.rev > feedRev:
			h.mu.Unlock()
			continue
		}
		c.skip = feedRev
		h.addLocked(c)
		h.mu.Unlock()
		return frames, true, nil
	}
	return nil, false, nil
}

func (h *hub) addLocked(c *client) {
	set := h.clients[c.owner]
	if set == nil {
		set = map[*client]struct{}{}
		h.clients[c.owner] = set
	}
	set[c] = struct{}{}
}

func (h *hub) removeLocked(c *client) {
	set := h.clients[c.owner]
	delete(set, c)
	if len(set) == 0 {
		delete(h.clients, c.owner)
	}
}

// detach stops queueing for c.
func (h *hub) detach(c *client) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.removeLocked(c)
}

// closeOwner asks owner's streams that match (all of them when match is
// nil) to close with code, stops queueing for them, and returns how many
// there were.
func (h *hub) closeOwner(owner string, match func(*client) bool, code int, reason string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for c := range h.clients[owner] {
		if match == nil || match(c) {
			c.kill(code, reason)
			h.removeLocked(c)
			n++
		}
	}
	return n
}

func (h *hub) killAllLocked(code int, reason string) {
	for _, set := range h.clients {
		for c := range set {
			c.kill(code, reason)
		}
	}
	h.clients = map[string]map[*client]struct{}{}
}

// close detaches every client, asking each to close with code 1001, and
// stops following the feed.
func (h *hub) close() {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return
	}
	h.closed = true
	h.killAllLocked(CloseGoingAway, "server shutting down")
	h.mu.Unlock()
	close(h.stop)
	<-h.done
}

// Stream frames are assembled by hand around the cached workspace JSON so
// that nothing is encoded twice.

func appendHead(b []byte, typ string, rev int64, now time.Time) []byte {
	b = append(b, `{"type":"`...)
	b = append(b, typ...)
	b = append(b, `","rev":`...)
	b = strconv.AppendInt(b, rev, 10)
	b = append(b, `,"server_time":"`...)
	b = wireTime(now).AppendFormat(b, time.RFC3339Nano)
	return append(b, '"')
}

func upsertFrame(rev int64, now time.Time, ws []byte) []byte {
	b := make([]byte, 0, len(ws)+96)
	b = appendHead(b, "upsert", rev, now)
	b = append(b, `,"workspace":`...)
	b = append(b, ws...)
	return append(b, '}')
}

func removeFrame(rev int64, now time.Time, id string) []byte {
	q, _ := json.Marshal(id)
	b := make([]byte, 0, len(q)+96)
	b = appendHead(b, "remove", rev, now)
	b = append(b, `,"id":`...)
	b = append(b, q...)
	return append(b, '}')
}
