package db

import (
	"context"
	"time"

	"github.com/canvasapp/companion/core"

	"github.com/jackc/pgx/v5"
)

var _ core.ChangeNotifier = (*PGStore)(nil)

// feedChannel is the NOTIFY channel on which every saved revision is
// announced. The payload is the revision alone: a replica reads the rows
// itself, so a payload can never be too large, stale or partial.
const feedChannel = "companion_feed"

// listenerApp prefixes the application_name of the listening connection,
// so an operator (or a test) can tell it apart in pg_stat_activity.
const listenerApp = "companion-feed-listener"

// Reconnection backoff of the listening connection.
const (
	listenRetryMin = 100 * time.Millisecond
	listenRetryMax = 5 * time.Second
)

// WatchChanges listens for the revisions any process sharing the database
// commits and calls notify with each, on a connection of its own (a
// pooled one would be handed to queries between waits). After every
// (re)connection it calls notify(0): what was committed while nobody
// listened must be read from the store. broken is told once when the
// connection fails (or cannot be made), not again until it worked. It
// returns when ctx ends.
func (s *PGStore) WatchChanges(ctx context.Context, notify func(rev int64), broken func(err error)) {
	wait := listenRetryMin
	failing := false
	for {
		connected, err := s.listen(ctx, notify)
		if ctx.Err() != nil {
			return
		}
		if connected {
			wait, failing = listenRetryMin, false
		}
		if !failing && broken != nil {
			broken(s.wrap("listen for changes", err))
		}
		failing = true
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		wait = min(2*wait, listenRetryMax)
	}
}

// listen connects, listens and relays notifications until the connection
// fails or ctx ends; connected says whether it got as far as listening.
func (s *PGStore) listen(ctx context.Context, notify func(rev int64)) (connected bool, err error) {
	cfg := s.pool.Config().ConnConfig.Copy()
	cfg.RuntimeParams["application_name"] = s.listenerName
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return false, err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		conn.Close(cctx)
		cancel()
	}()
	// One connection listens to both channels, so that a replica hears
	// of the stream's relayed messages in the order they were sent.
	if _, err := conn.Exec(ctx, "LISTEN "+feedChannel+"; LISTEN "+streamChannel); err != nil {
		return false, err
	}
	if p := s.receive.Load(); p != nil {
		(*p)(core.Relayed{Kind: core.RelayMissed}) // relayed messages may have been missed
	}
	notify(0)
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return true, err
		}
		s.deliver(n.Channel, n.Payload, notify)
	}
}
