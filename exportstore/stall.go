package exportstore

import (
	"context"
	"fmt"
	"io"
	"time"
)

// watchdog cancels a streaming operation's context when one call into the
// store (a write, a read, a close) stays blocked longer than its limit.
// Time spent outside the store (the caller's source producing bytes, the
// caller's consumer) does not count, so a slow box does not trip it.
type watchdog struct {
	timer *time.Timer
	limit time.Duration
}

// withWatchdog returns a context that the watchdog cancels, with a cause
// matching ErrUnavailable, and a stop func that must be called when the
// operation ends.
func withWatchdog(ctx context.Context, limit time.Duration) (context.Context, *watchdog, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	cause := withKind(fmt.Errorf("the store did not answer within %s", limit), ErrUnavailable)
	w := &watchdog{limit: limit, timer: time.AfterFunc(limit, func() { cancel(cause) })}
	w.timer.Stop()
	return ctx, w, func() { w.timer.Stop(); cancel(nil) }
}

func (w *watchdog) arm()    { w.timer.Reset(w.limit) }
func (w *watchdog) disarm() { w.timer.Stop() }

// guardedWriter arms the watchdog for each Write.
type guardedWriter struct {
	w  io.Writer
	wd *watchdog
}

func (g guardedWriter) Write(p []byte) (int, error) {
	g.wd.arm()
	defer g.wd.disarm()
	return g.w.Write(p)
}

// guardedReader arms the watchdog for each Read.
type guardedReader struct {
	r  io.Reader
	wd *watchdog
}

func (g guardedReader) Read(p []byte) (int, error) {
	g.wd.arm()
	defer g.wd.disarm()
	return g.r.Read(p)
}
