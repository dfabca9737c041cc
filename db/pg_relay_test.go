package db_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/db"
	"github.com/canvasapp/companion/internal/testsupport"
	"github.com/canvasapp/companion/internal/testsupport/pgtest"
)

// heard is what one store's listener delivered, in order: relayed
// messages and revisions (as Relayed{Kind: "rev"}).
type heard struct {
	mu   sync.Mutex
	list []core.Relayed
	up   chan struct{} // closed at the first (re)connection
	// missed counts the RelayMissed the listener gave at each connection.
	missed int
	once   sync.Once
}

func listenTo(t *testing.T, s *db.PGStore) *heard {
	t.Helper()
	h := &heard{up: make(chan struct{})}
	s.ReceiveStream(func(m core.Relayed) {
		h.mu.Lock()
		if m.Kind == core.RelayMissed {
			h.missed++
		} else {
			h.list = append(h.list, m)
		}
		h.mu.Unlock()
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.WatchChanges(ctx, func(rev int64) {
			if rev == 0 {
				h.once.Do(func() { close(h.up) })
				return
			}
			h.mu.Lock()
			h.list = append(h.list, core.Relayed{Kind: "rev", Rev: rev})
			h.mu.Unlock()
		}, nil)
	}()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case <-h.up:
	case <-time.After(20 * time.Second):
		t.Fatal("the listener did not connect")
	}
	return h
}

// wait returns what was heard once n messages were.
func (h *heard) wait(t *testing.T, n int) []core.Relayed {
	t.Helper()
	var got []core.Relayed
	testsupport.Until(t, 20*time.Second, fmt.Sprintf("%d messages heard", n), func() bool {
		h.mu.Lock()
		got = append([]core.Relayed(nil), h.list...)
		h.mu.Unlock()
		return len(got) >= n
	})
	return got
}

// openPGStore opens one replica's store on url, closed at the end.
func openPGStore(t *testing.T, url string) *db.PGStore {
	t.Helper()
	s, err := db.OpenPostgres(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestStreamRelayBetweenStores: a notice or an account status relayed by
// one store reaches the other store's listener, not its own; a saved
// progress line reaches every listener, the saver's too, just before its
// revision; long texts are cut on a character boundary so the payload
// stays under PostgreSQL's limit.
func TestStreamRelayBetweenStores(t *testing.T) {
	ctx := context.Background()
	url := pgtest.NewDatabase(t)
	a, b := openPGStore(t, url), openPGStore(t, url)
	ha, hb := listenTo(t, a), listenTo(t, b)

	due := time.Date(2026, 12, 24, 10, 0, 0, 0, time.UTC)
	notice := core.Notice{Kind: core.NoticeRetentionWarning, Owner: "alice", WorkspaceID: "ws_1", DeleteAfter: due}
	if err := a.RelayStream(ctx, core.Relayed{Kind: core.RelayNotice, Notice: notice}); err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("é", 6000) // 12,000 bytes
	since := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	st := core.AccountStatus{State: core.AccountFailing, Kind: core.KindUnavailable, Message: long,
		NextAttemptAt: due, Flag: &core.AccountFlag{Code: core.FlagInventingBoxes, Message: long, Since: since}}
	if err := b.RelayStream(ctx, core.Relayed{Kind: core.RelayAccount, AccountID: "acct-1", Status: st}); err != nil {
		t.Fatal(err)
	}

	got := hb.wait(t, 1)[0]
	if got.Kind != core.RelayNotice || got.Notice != notice {
		t.Fatalf("B heard %+v, want A's notice %+v", got, notice)
	}
	// A's listener hears B's status first: its own notice, sent before,
	// is not delivered to it.
	got = ha.wait(t, 1)[0]
	if got.Kind != core.RelayAccount || got.AccountID != "acct-1" || got.Status.State != core.AccountFailing ||
		got.Status.Kind != core.KindUnavailable || !got.Status.NextAttemptAt.Equal(due) {
		t.Fatalf("A heard %+v, want B's status of acct-1", got)
	}
	for what, s := range map[string]string{"message": got.Status.Message, "flag message": got.Status.Flag.Message} {
		if len(s) > 2048 || !utf8.ValidString(s) || !strings.HasSuffix(s, "…") || !strings.HasPrefix(long, strings.TrimSuffix(s, "…")) {
			t.Errorf("relayed %s: %d bytes, valid UTF-8 %v, ending %q: want the start of the text, cut at 2048 bytes", what, len(s), utf8.ValidString(s), s[max(0, len(s)-8):])
		}
	}
	if f := got.Status.Flag; f.Code != core.FlagInventingBoxes || !f.Since.Equal(since) {
		t.Errorf("relayed flag %+v", f)
	}

	// A save carrying a progress line: every listener hears the line, then
	// the revision; a save without one, only the revision.
	ws := core.Workspace{ID: "ws_p", Owner: "alice", Name: "p", State: core.StateCreating, Progress: "pulling " + long}
	saved, err := a.SaveWorkspace(ctx, ws)
	if err != nil {
		t.Fatal(err)
	}
	ws.Progress = ""
	plain, err := a.SaveWorkspace(ctx, ws)
	if err != nil {
		t.Fatal(err)
	}
	for name, h := range map[string]*heard{"A": ha, "B": hb} {
		list := h.wait(t, 4)[1:]
		p, rev, rev2 := list[0], list[1], list[2]
		if p.Kind != core.RelayProgress || p.Rev != saved.Rev || p.WorkspaceID != ws.ID {
			t.Fatalf("%s heard %+v first, want the progress of revision %d", name, p, saved.Rev)
		}
		if len(p.Progress) > 1024 || !utf8.ValidString(p.Progress) || !strings.HasPrefix(p.Progress, "pulling éé") || !strings.HasSuffix(p.Progress, "…") {
			t.Errorf("%s heard a progress line of %d bytes (valid %v): want it cut at 1024", name, len(p.Progress), utf8.ValidString(p.Progress))
		}
		if rev.Kind != "rev" || rev.Rev != saved.Rev || rev2.Kind != "rev" || rev2.Rev != plain.Rev {
			t.Errorf("%s heard %+v then %+v, want revisions %d and %d", name, rev, rev2, saved.Rev, plain.Rev)
		}
	}
	// The stored row never holds the line.
	if got, err := b.GetWorkspace(ctx, ws.ID); err != nil || got.Progress != "" {
		t.Errorf("stored workspace: %+v, %v; want no progress", got, err)
	}
}

// TestPolicyAnnouncementBetweenStores: a retention policy's change is
// announced to the other stores' listeners with its account only, not to
// the announcer's own; each listener tells its receiver when it
// (re)connected, since announcements made before were missed.
func TestPolicyAnnouncementBetweenStores(t *testing.T) {
	ctx := context.Background()
	url := pgtest.NewDatabase(t)
	a, b := openPGStore(t, url), openPGStore(t, url)
	ha, hb := listenTo(t, a), listenTo(t, b)
	if err := a.RelayStream(ctx, core.Relayed{Kind: core.RelayPolicy, AccountID: "acct-1"}); err != nil {
		t.Fatal(err)
	}
	if err := b.RelayStream(ctx, core.Relayed{Kind: core.RelayPolicy, AccountID: "acct-2"}); err != nil {
		t.Fatal(err)
	}
	if got := hb.wait(t, 1)[0]; got.Kind != core.RelayPolicy || got.AccountID != "acct-1" {
		t.Fatalf("B heard %+v, want A's announcement of acct-1's policy", got)
	}
	if got := ha.wait(t, 1)[0]; got.Kind != core.RelayPolicy || got.AccountID != "acct-2" {
		t.Fatalf("A heard %+v, want B's announcement of acct-2's policy (not its own)", got)
	}
	// Each listener said, once it listened, that what was sent before
	// was missed (the receiver then reads the policies again).
	for name, h := range map[string]*heard{"A": ha, "B": hb} {
		h.mu.Lock()
		n := h.missed
		h.mu.Unlock()
		if n != 1 {
			t.Errorf("%s's listener gave %d RelayMissed after one connection, want 1", name, n)
		}
	}
}
