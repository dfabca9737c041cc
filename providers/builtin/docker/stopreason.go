package docker

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/providers/builtin/docker/internal/engine"
)

// Why a container stopped. The engine's inspect answer does not say
// whether someone asked for the stop; its event log does: `docker stop`
// (and companion's own ContainerStop) logs "kill", "die", "stop", while a
// process that exits or is killed (`docker kill`, the OOM killer) logs
// only "die". Companion's own pause is told apart by core, which knows it
// asked; here it is a stop from outside like any other.
//
// The engine keeps only its last few hundred events. When the stop has
// fallen out of that window the exit code decides: 0 or 143 (SIGTERM,
// what a stop sends) reads as a stop with an unknown reason, anything else
// as a crash. A verdict is remembered per container and stop time, so the
// window matters only for a stop companion did not see happen.

// stopEventSlack is how long after FinishedAt the "stop" event may come.
const stopEventSlack = 10 * time.Second

type stopVerdict struct {
	state  core.State
	reason core.StopReason
}

type stopCache struct {
	mu sync.Mutex
	m  map[string]stopVerdict // container id + "@" + finished-at nanos
}

const stopCacheMax = 4096

func (c *stopCache) get(k string) (stopVerdict, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.m[k]
	return v, ok
}

func (c *stopCache) put(k string, v stopVerdict) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= stopCacheMax {
		c.m = map[string]stopVerdict{}
	}
	c.m[k] = v
}

// classifyStop fills the state, stop reason, exit code and paused time of
// an exited container.
func (p *Provider) classifyStop(ctx context.Context, b *core.Box, id string, st *engine.State) {
	started, finished := parseTime(st.StartedAt), parseTime(st.FinishedAt)
	if finished.IsZero() || finished.Before(started) {
		return // created, never started: paused, nobody stopped it
	}
	code := st.ExitCode
	b.ExitCode = &code
	key := fmt.Sprintf("%s@%d", id, finished.UnixNano())
	v, ok := p.stops.get(key)
	if !ok {
		var known bool
		v, known = p.stopFromEvents(ctx, id, started, finished, st)
		if known {
			p.stops.put(key, v)
		}
	}
	b.State, b.StopReason = v.state, v.reason
	if v.state == core.StatePaused {
		b.PausedAt = finished
	}
}

// stopFromEvents reads the container's events between its start and just
// after its stop. known is false when the events were not available (the
// window passed them, or the query failed) and the exit code decided.
func (p *Provider) stopFromEvents(ctx context.Context, id string, started, finished time.Time, st *engine.State) (v stopVerdict, known bool) {
	byCode := verdictByCode(st)
	ectx, cancel := context.WithTimeout(ctx, metaTimeout)
	defer cancel()
	until, settled := finished.Add(stopEventSlack), true
	if now := time.Now(); until.After(now) {
		// A `docker stop` logs "stop" just after "die": a crash seen
		// this early is reported but not remembered.
		until, settled = now, false
	}
	evs, err := p.cli.Events(ectx, unixArg(started), unixArg(until),
		engine.Filters{"type": {"container"}, "container": {id}, "event": {"die", "stop"}})
	if err != nil {
		p.log.Warn("could not read the engine's events to tell why a box stopped", "box", id, "err", err)
		return byCode, false
	}
	sawDie, sawStop := false, false
	for _, m := range evs {
		switch m.Action {
		case "die":
			sawDie = true
		case "stop":
			sawStop = true
		}
	}
	switch {
	case sawStop:
		return stopVerdict{core.StatePaused, core.StopOutside}, true
	case sawDie:
		return crashVerdict(st), settled
	}
	// No events at all: they left the engine's window, and will not
	// come back.
	return byCode, settled
}

func crashVerdict(st *engine.State) stopVerdict {
	if st.ExitCode == 0 && !st.OOMKilled {
		return stopVerdict{core.StateStopped, core.StopExited}
	}
	return stopVerdict{core.StateStopped, core.StopCrashed}
}

func verdictByCode(st *engine.State) stopVerdict {
	if !st.OOMKilled && (st.ExitCode == 0 || st.ExitCode == 143) {
		return stopVerdict{core.StatePaused, core.StopNone}
	}
	return crashVerdict(st)
}

func unixArg(t time.Time) string {
	return fmt.Sprintf("%d.%09d", t.Unix(), t.Nanosecond())
}
