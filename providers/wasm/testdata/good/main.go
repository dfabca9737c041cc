// Command good is a well-behaved provider module used by the host's tests
// and benchmarks. It drives the small box API served by the tests, and with
// the account setting mode=static it answers list from memory (no HTTP),
// which is what the benchmarks measure.
package main

import (
	"context"
	"net/url"
	"strings"
	"time"

	"github.com/canvasapp/companion/providers/wasm/sdk"
)

type provider struct{}

var caps = sdk.Capabilities{List: true, LastActivity: true, Suspend: true, SuspendKeepsFiles: true, ResumeSameIdentity: true, Delete: true}

func (provider) Describe(context.Context) (sdk.Info, error) {
	return sdk.Info{Name: "good", Version: "1.0.0", Capabilities: &caps}, nil
}

type apiBox struct {
	ID        string            `json:"id"`
	Name      string            `json:"name"`
	State     string            `json:"state"`
	Labels    map[string]string `json:"labels"`
	Created   time.Time         `json:"created"`
	PausedAt  *time.Time        `json:"paused_at"`
	ActiveAt  *time.Time        `json:"active_at"`
	DiskBytes int64             `json:"disk_bytes"`
}

func (b apiBox) box() sdk.Box {
	out := sdk.Box{ID: b.ID, Name: b.Name, Labels: b.Labels, CreatedAt: b.Created, URL: "https://" + b.ID + ".boxes.example"}
	switch b.State {
	case "started":
		out.State = sdk.Running
	case "stopped":
		out.State = sdk.Paused
	default:
		out.State = sdk.Unknown
	}
	if b.PausedAt != nil {
		out.PausedAt = *b.PausedAt
	}
	if b.ActiveAt != nil {
		out.LastActivityAt = *b.ActiveAt
	}
	if b.DiskBytes > 0 {
		out.Size = &sdk.Size{Bytes: b.DiskBytes, Source: sdk.SizeAllocated}
	}
	return out
}

var static = []sdk.Box{
	{ID: "b-1", Name: "one", State: sdk.Running, Labels: map[string]string{sdk.LabelWorkspace: "ws-1"}, CreatedAt: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)},
	{ID: "b-2", Name: "two", State: sdk.Paused, PausedAt: time.Date(2025, 1, 2, 0, 0, 0, 0, time.UTC)},
	{ID: "b-3", Name: "three", State: sdk.Running, Size: &sdk.Size{Bytes: 1 << 30, Source: sdk.SizeUsed}},
}

func call(ctx context.Context, req sdk.Request, out any) error {
	resp, err := sdk.HTTP(ctx).Do(req)
	if err != nil {
		return err
	}
	if err := resp.Err(); err != nil {
		return err
	}
	if out == nil {
		return nil
	}
	return resp.Decode(out)
}

func (provider) List(ctx context.Context, acct sdk.Account) ([]sdk.Box, error) {
	// Read the map once: Go compares a map index with a short constant by
	// indexing the map again for every byte.
	if mode := acct.Config["mode"]; mode == "static" {
		return static, nil
	}
	var boxes []sdk.Box
	page := "1"
	for page != "" {
		var res struct {
			Boxes []apiBox `json:"boxes"`
			Next  string   `json:"next"`
		}
		if err := call(ctx, sdk.Request{Upstream: "api", Path: "/boxes", Query: url.Values{"page": {page}}}, &res); err != nil {
			return nil, err
		}
		for _, b := range res.Boxes {
			boxes = append(boxes, b.box())
		}
		page = res.Next
	}
	return boxes, nil
}

func (p provider) one(ctx context.Context, method, path string, body any) (sdk.Box, error) {
	var b apiBox
	if err := call(ctx, sdk.Request{Upstream: "api", Method: method, Path: path, JSON: body}, &b); err != nil {
		return sdk.Box{}, err
	}
	return b.box(), nil
}

func (p provider) Get(ctx context.Context, _ sdk.Account, id string) (sdk.Box, error) {
	if strings.HasPrefix(id, "file-") {
		// Archived boxes live in the file store, a second upstream with
		// its own credential.
		var b apiBox
		if err := call(ctx, sdk.Request{Upstream: "files", Path: "/files/" + url.PathEscape(id)}, &b); err != nil {
			return sdk.Box{}, err
		}
		return b.box(), nil
	}
	return p.one(ctx, "GET", "/boxes/"+url.PathEscape(id), nil)
}

func (p provider) Create(ctx context.Context, _ sdk.Account, spec sdk.CreateSpec) (sdk.Box, error) {
	return p.one(ctx, "POST", "/boxes", map[string]any{
		"name":         spec.Name,
		"labels":       spec.Labels,
		"idle_seconds": int64(spec.Lifecycle.IdlePauseAfter / time.Second),
	})
}

func (p provider) Suspend(ctx context.Context, _ sdk.Account, id string) (sdk.Box, error) {
	return p.one(ctx, "POST", "/boxes/"+url.PathEscape(id)+"/pause", nil)
}

func (p provider) Resume(ctx context.Context, _ sdk.Account, id string) (sdk.Box, error) {
	return p.one(ctx, "POST", "/boxes/"+url.PathEscape(id)+"/resume", nil)
}

func (provider) Delete(ctx context.Context, _ sdk.Account, id string) error {
	err := call(ctx, sdk.Request{Upstream: "api", Method: "DELETE", Path: "/boxes/" + url.PathEscape(id)}, nil)
	if e, ok := err.(*sdk.Error); ok && e.Kind == sdk.NotFound {
		return nil
	}
	return err
}

func init() { sdk.Register(provider{}) }

func main() {}
