package docker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/canvasapp/companion/core"
	"github.com/canvasapp/companion/internal/units"
	"github.com/canvasapp/companion/providers/builtin/docker/internal/engine"
)

// DefaultImage is the published OpenHands agent-server image (see
// docs/decisions.md, "The docker provider's default image"). A machine
// without a registry passes --docker-image with an image it has.
const DefaultImage = "ghcr.io/all-hands-ai/agent-server:latest"

const (
	// pullIdleTimeout fails a pull that reports nothing for this long; a
	// large image may take many minutes, but its stream keeps moving.
	pullIdleTimeout = 2 * time.Minute
	// pullRetryAfter is how long a failed pull is reported as is before
	// the next Ping or Create tries again.
	pullRetryAfter = 30 * time.Second
	// pingImageWait is how long Ping waits for a pull it started to end,
	// so that a registry that cannot be reached (a quick failure) makes
	// the provider unavailable at once.
	pingImageWait = 3 * time.Second
	// progressLogEvery spaces out pull progress in the log.
	progressLogEvery = 5 * time.Second
)

// pull is one image pull, shared by everyone waiting for that image.
type pull struct {
	image string
	done  chan struct{}
	err   error     // set before done closes
	ended time.Time // set before done closes

	mu   sync.Mutex
	line string
}

func (pl *pull) status() string {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	return pl.line
}

func (pl *pull) setStatus(line string) {
	pl.mu.Lock()
	pl.line = line
	pl.mu.Unlock()
}

// stillPulling is returned when the caller's context ended while the pull
// it waited for goes on.
type stillPulling struct{ image, line string }

func (e *stillPulling) Error() string {
	return fmt.Sprintf("image %s is still being pulled (%s)", e.image, e.line)
}

// ensureImage returns nil once image is at the engine, pulling it if
// missing. report, if not nil, gets progress lines while it waits. A pull
// outlives the caller's context (others may wait for it too); the caller
// then gets *stillPulling.
func (p *Provider) ensureImage(ctx context.Context, image string, report func(string)) error {
	if present, err := p.imagePresent(ctx, image); err != nil || present {
		return err
	}
	pl, _ := p.startPull(image)
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-pl.done:
			return pl.err
		case <-ctx.Done():
			return &stillPulling{image: image, line: pl.status()}
		case <-tick.C:
			if report != nil {
				if line := pl.status(); line != "" {
					report(line)
				}
			}
		}
	}
}

func (p *Provider) imagePresent(ctx context.Context, image string) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, metaTimeout)
	defer cancel()
	_, err := p.cli.ImageInspect(ctx, image)
	switch {
	case err == nil:
		return true, nil
	case engine.IsNotFound(err):
		return false, nil
	}
	return false, p.wrap(err, "inspect image "+image+" at", "")
}

// imageVerdict says quickly whether image can be used: nil when it is at
// the engine or a pull is under way, the pull's error when it failed. A
// pull it starts itself gets pingImageWait to fail (a registry that
// cannot be reached fails at once); one already running is not waited
// for, so asking again while a large image downloads stays quick.
func (p *Provider) imageVerdict(ctx context.Context, image string) error {
	if present, err := p.imagePresent(ctx, image); err != nil || present {
		return err
	}
	pl, fresh := p.startPull(image)
	var wait <-chan time.Time
	if fresh {
		t := time.NewTimer(pingImageWait)
		defer t.Stop()
		wait = t.C
	}
	select {
	case <-pl.done:
		return pl.err
	default:
	}
	if !fresh {
		return nil
	}
	select {
	case <-pl.done:
		return pl.err
	case <-wait:
	case <-ctx.Done():
	}
	return nil
}

// startPull returns the pull of image under way, or a failed one that
// ended less than pullRetryAfter ago, or starts a new one (fresh).
func (p *Provider) startPull(image string) (*pull, bool) {
	p.pullMu.Lock()
	defer p.pullMu.Unlock()
	if pl := p.pulls[image]; pl != nil {
		select {
		case <-pl.done:
			if pl.err != nil && p.cfg.Now().Sub(pl.ended) < pullRetryAfter {
				return pl, false
			}
		default:
			return pl, false
		}
	}
	pl := &pull{image: image, done: make(chan struct{}), line: "pulling image " + image + ": starting"}
	if p.pulls == nil {
		p.pulls = map[string]*pull{}
	}
	p.pulls[image] = pl
	go p.runPull(pl)
	return pl, true
}

func (p *Provider) runPull(pl *pull) {
	log := p.log.With("image", pl.image)
	log.Info("image not at the Docker Engine; pulling it")
	err := p.doPull(pl, log)
	if err != nil {
		log.Warn("image pull failed", "err", err)
	} else {
		log.Info("image pulled")
	}
	pl.err, pl.ended = err, p.cfg.Now()
	close(pl.done)
}

func (p *Provider) doPull(pl *pull, log *slog.Logger) error {
	ctx, cancel := context.WithCancelCause(p.bg)
	defer cancel(nil)
	idle := time.AfterFunc(pullIdleTimeout, func() {
		cancel(fmt.Errorf("the pull reported nothing for %v", pullIdleTimeout))
	})
	defer idle.Stop()
	res, err := p.cli.ImagePull(ctx, pl.image)
	if err != nil {
		return p.pullError(pl.image, err, context.Cause(ctx))
	}
	defer res.Close()
	layers := map[string]*layerProgress{}
	var lastLog time.Time
	err = engine.DecodePull(res, func(m engine.PullMessage) error {
		idle.Reset(pullIdleTimeout)
		if m.ID != "" && layerStatus[m.Status] {
			lp := layers[m.ID]
			if lp == nil {
				lp = &layerProgress{}
				layers[m.ID] = lp
			}
			lp.update(m.Status, m.ProgressDetail)
		}
		line := pullLine(pl.image, layers)
		pl.setStatus(line)
		if now := time.Now(); now.Sub(lastLog) >= progressLogEvery {
			lastLog = now
			log.Info(line)
		}
		return nil
	})
	var streamErr *engine.Error
	if errors.As(err, &streamErr) {
		// The engine reported the failure in the stream.
		return p.pullError(pl.image, errors.New(streamErr.Message), nil)
	}
	if err != nil {
		return p.pullError(pl.image, err, context.Cause(ctx))
	}
	return nil
}

// pullError words a failed pull: what failed, the engine's reason, and
// what to do.
func (p *Provider) pullError(image string, err, cause error) error {
	if cause != nil {
		err = cause
	}
	if engine.IsConnectionFailed(err) {
		return p.wrap(err, "pull image "+image+" through", "")
	}
	return &core.Error{
		Kind: core.KindUnavailable,
		Message: fmt.Sprintf("Docker image %s is not at the Docker Engine and could not be pulled (%s): "+
			"pull or build it (docker pull %s), or start companion with %s naming an image the engine has",
			image, err.Error(), image, p.cfg.ImageFlag),
		Err: err,
	}
}

// layerStatus are the pull stream's statuses about a layer (others, such
// as "Pulling from …", carry the tag or digest as their ID).
var layerStatus = map[string]bool{
	"Pulling fs layer": true, "Waiting": true, "Downloading": true, "Verifying Checksum": true,
	"Download complete": true, "Extracting": true, "Pull complete": true, "Already exists": true,
}

// layerProgress is one layer's download as the pull stream reports it.
type layerProgress struct {
	current, total int64
	done           bool
}

func (lp *layerProgress) update(status string, pr *engine.Progress) {
	switch status {
	case "Download complete", "Pull complete", "Already exists", "Verifying Checksum", "Extracting":
		lp.done = true
		if lp.total > 0 {
			lp.current = lp.total
		}
	case "Downloading":
		if pr != nil && pr.Total > 0 {
			lp.current, lp.total = pr.Current, pr.Total
		}
	}
}

// pullLine is a one-line summary of a pull: bytes downloaded of the
// layers whose size is known so far, and layers done.
func pullLine(image string, layers map[string]*layerProgress) string {
	var cur, total int64
	done := 0
	ids := make([]string, 0, len(layers))
	for id := range layers {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		lp := layers[id]
		cur += lp.current
		total += lp.total
		if lp.done {
			done++
		}
	}
	if len(layers) == 0 {
		return "pulling image " + image + ": resolving"
	}
	return fmt.Sprintf("pulling image %s: %s of %s downloaded, %d of %d layers done",
		image, units.Bytes(cur), units.Bytes(total), done, len(layers))
}

// checkDefaultImage is Ping's image check: the default image is there, or
// being pulled (available: a create waits for it), or could not be pulled
// (unavailable, with the reason and the fix).
func (p *Provider) checkDefaultImage(ctx context.Context) error {
	return p.imageVerdict(ctx, p.cfg.Image)
}

// createImageError words an image problem for Create. A pull still under
// way is unavailable (core retries the create, which joins the pull); an
// image named in the create's options that cannot be pulled is the
// caller's to fix.
func (p *Provider) createImageError(err error, image string, fromOption bool) error {
	var sp *stillPulling
	if errors.As(err, &sp) {
		return &core.Error{Kind: core.KindUnavailable, Message: sp.Error() + "; the create goes on when it is done", Err: err}
	}
	var ce *core.Error
	if fromOption && errors.As(err, &ce) && ce.Kind == core.KindUnavailable && ce.Err != nil && !engine.IsConnectionFailed(ce.Err) {
		return &core.Error{Kind: core.KindInvalid, Err: err, Message: fmt.Sprintf(
			"options.%s: Docker image %s is not at the Docker Engine and could not be pulled (%s): pull or build it, or name another image",
			OptionImage, image, ce.Err.Error())}
	}
	return err
}

// CheckCreate implements core.CreateChecker: the engine must answer, and
// the create's image (its option, else the default) must be at the engine
// or pullable, checked before the create is recorded (waiting a few
// seconds at most for a pull's verdict).
func (p *Provider) CheckCreate(ctx context.Context, acct core.Account, spec core.CreateSpec) error {
	if err := p.pingEngine(ctx); err != nil {
		return err
	}
	image := spec.Options[OptionImage]
	if image == "" || image == p.cfg.Image {
		return p.checkDefaultImage(ctx)
	}
	if err := p.imageVerdict(ctx, image); err != nil {
		return p.createImageError(err, image, true)
	}
	return nil
}
