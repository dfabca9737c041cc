package docker

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// usage is one /system/df answer, reduced to what sizes need.
type usage struct {
	at         time.Time
	containers map[string]int64 // container id → writable layer bytes
	volumes    map[string]int64 // volume name → bytes (absent if unknown)
}

type duFlight struct {
	done chan struct{}
	u    *usage
	err  error
}

// diskUsage returns the engine's disk usage. Concurrent callers share one
// request: /system/df walks every layer and volume, and engines before API
// 1.42 refuse a second one while the first runs ("a disk usage operation
// is already running"), which is also retried briefly in case another
// program asked.
func (p *Provider) diskUsage(ctx context.Context) (*usage, error) {
	p.duMu.Lock()
	f := p.duCur
	if f == nil {
		f = &duFlight{done: make(chan struct{})}
		p.duCur = f
		go func() {
			// Detached from the first caller so that its cancellation
			// does not fail the others; bounded on its own.
			ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
			defer cancel()
			f.u, f.err = p.fetchDiskUsage(ctx)
			p.duMu.Lock()
			p.duCur = nil
			p.duMu.Unlock()
			close(f.done)
		}()
	}
	p.duMu.Unlock()
	select {
	case <-f.done:
		return f.u, f.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (p *Provider) fetchDiskUsage(ctx context.Context) (*usage, error) {
	for attempt := 0; ; attempt++ {
		du, err := p.cli.DiskUsage(ctx)
		if err != nil {
			if strings.Contains(err.Error(), "already running") && attempt < 10 {
				select {
				case <-time.After(200 * time.Millisecond):
					continue
				case <-ctx.Done():
				}
			}
			return nil, p.wrap(err, "measure disk usage", "")
		}
		u := &usage{at: p.cfg.Now(), containers: map[string]int64{}, volumes: map[string]int64{}}
		for _, c := range du.Containers {
			u.containers[c.ID] = c.SizeRw
		}
		for _, v := range du.Volumes {
			// -1 means the engine could not tell.
			if v.UsageData != nil && v.UsageData.Size >= 0 {
				u.volumes[v.Name] = v.UsageData.Size
			}
		}
		return u, nil
	}
}

// lastActivity asks a running box's agent-server for its idle clock and
// returns now − idle_time. /server_info is a status probe, which the
// agent-server does not count as activity. A box still booting does not
// answer: that is no error, just an unknown time (zero).
func (p *Provider) lastActivity(ctx context.Context, url string) time.Time {
	// The idle time is read some time between sending and receiving; dating
	// it from the send keeps a slow answer from looking like new activity.
	sent := p.cfg.Now()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/server_info", nil)
	if err != nil {
		return time.Time{}
	}
	resp, err := p.probe.Do(req)
	if err != nil {
		p.log.Debug("agent-server did not answer", "url", url, "err", err)
		return time.Time{}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		p.log.Debug("agent-server answered server_info with an error", "url", url, "status", resp.Status)
		return time.Time{}
	}
	var info struct {
		IdleTime *float64 `json:"idle_time"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&info); err != nil || info.IdleTime == nil || *info.IdleTime < 0 {
		p.log.Debug("agent-server server_info without a usable idle_time", "url", url, "err", fmt.Sprint(err))
		return time.Time{}
	}
	return sent.Add(-time.Duration(*info.IdleTime * float64(time.Second)))
}
