package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"
)

// bashEvents keeps the bash events (BashCommand, BashOutput) as upstream's
// BashEventService does: one file per event in the bash events directory,
// named <UTC time to the microsecond>_<kind>[_<command id>]_<event id>
// (ids in 32-hex), holding the event as json.dumps(indent=2) writes it,
// and each event is published to the bash-events sockets once it is
// saved. Nothing removes them (upstream purges them only when
// bash_events_retention_seconds is set).
type bashEvents struct {
	dir string
	log *slog.Logger

	mu   sync.Mutex // orders saving and publishing, so a resend cuts cleanly
	subs *pubsub
}

func newBashEvents(dir string, log *slog.Logger) *bashEvents {
	return &bashEvents{dir: dir, log: log, subs: newPubSub(0)}
}

// record saves ev and publishes it. A failure to save is logged and the
// event is still published, as upstream would only lose the file.
func (b *bashEvents) record(ev map[string]any) {
	frame, err := compactJSON(ev)
	if err != nil {
		b.log.Warn("bash event not published", "id", ev["id"], "err", err)
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.save(ev); err != nil {
		b.log.Warn("bash event not saved", "id", ev["id"], "err", err)
	}
	b.subs.publish(frame)
}

func (b *bashEvents) save(ev map[string]any) error {
	name, err := bashEventName(ev)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(b.dir, 0o755); err != nil {
		return err
	}
	data, err := json.MarshalIndent(ev, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(b.dir, name), data, 0o644)
}

// bashEventName is upstream's file name for an event.
func bashEventName(ev map[string]any) (string, error) {
	ts, _ := ev["timestamp"].(string)
	t, err := time.Parse(time.RFC3339Nano, ts)
	if err != nil {
		return "", fmt.Errorf("bash event timestamp %q: %w", ts, err)
	}
	t = t.UTC()
	parts := []string{t.Format("20060102150405") + fmt.Sprintf("%06d", t.Nanosecond()/1000), fmt.Sprint(ev["kind"])}
	if cmd, ok := ev["command_id"].(string); ok && cmd != "" {
		parts = append(parts, strings.ReplaceAll(cmd, "-", ""))
	}
	id, _ := ev["id"].(string)
	parts = append(parts, strings.ReplaceAll(id, "-", ""))
	return strings.Join(parts, "_"), nil
}

// subscribe subscribes s and, when resend is set, queues the stored
// events for it in file-name (time) order first, under the lock that
// record takes: s gets each event once, stored ones before live ones.
// Unreadable files are skipped, as upstream skips them; a directory that
// cannot be listed leaves s subscribed with nothing resent.
func (b *bashEvents) subscribe(s subscriber, resend bool) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.subs.subscribe(s); err != nil {
		return err
	}
	if !resend {
		return nil
	}
	entries, err := os.ReadDir(b.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("bash events: %w", err)
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	for _, name := range names {
		var ev map[string]any
		if err := readJSONFile(filepath.Join(b.dir, name), &ev); err != nil {
			b.log.Warn("skipping unreadable bash event", "file", name, "err", err)
			continue
		}
		if frame, err := compactJSON(ev); err == nil {
			s.deliver(frame)
		}
	}
	return nil
}
