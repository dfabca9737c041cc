// Command boxyard is a complete example provider module, written against
// the SDK alone, for a made-up sandbox API ("Boxyard"):
//
//	GET    /boxes             {"boxes": [box, ...]}
//	GET    /boxes/{id}        box, 404 when gone
//	POST   /boxes             {"name", "labels", "idle_timeout_seconds"} -> 201 box
//	POST   /boxes/{id}/stop   box
//	POST   /boxes/{id}/start  box
//	DELETE /boxes/{id}        204, 404 when gone
//
// where box is {"id", "name", "status": "starting|running|stopping|stopped",
// "labels", "created_at"}. ABI.md walks through building, packing and
// installing it; e2e/sdk_test.go does exactly that from a copy outside this
// repository.
package main

import (
	"context"
	"net/url"
	"time"

	"github.com/canvasapp/companion/providers/wasm/sdk"
)

type boxyard struct{ sdk.Unimplemented }

// apiBox is a box as the Boxyard API sends it.
type apiBox struct {
	ID        string            `json:"id"`
	Name      string            `json:"name"`
	Status    string            `json:"status"`
	Labels    map[string]string `json:"labels"`
	CreatedAt time.Time         `json:"created_at"`
}

func (b apiBox) box() sdk.Box {
	st := sdk.Unknown
	switch b.Status {
	case "starting":
		st = sdk.Resuming
	case "running":
		st = sdk.Running
	case "stopping":
		st = sdk.Pausing
	case "stopped":
		st = sdk.Paused
	}
	return sdk.Box{ID: b.ID, Name: b.Name, State: st, Labels: b.Labels, CreatedAt: b.CreatedAt}
}

// call sends one request to the "api" upstream (the host adds the token)
// and decodes a 2xx JSON answer into out, if given.
func call(ctx context.Context, method, path string, body, out any) error {
	resp, err := sdk.HTTP(ctx).Do(sdk.Request{Upstream: "api", Method: method, Path: path, JSON: body})
	if err != nil {
		return err
	}
	if err := resp.Err(); err != nil {
		return err // 401 -> unauthorized, 404 -> not_found, 429 -> rate_limited, ...
	}
	if out == nil {
		return nil
	}
	return resp.Decode(out)
}

func (boxyard) Describe(context.Context) (sdk.Info, error) {
	return sdk.Info{Name: "boxyard", Version: "0.1.0"}, nil
}

func (boxyard) List(ctx context.Context, _ sdk.Account) ([]sdk.Box, error) {
	var page struct{ Boxes []apiBox }
	if err := call(ctx, "GET", "/boxes", nil, &page); err != nil {
		return nil, err
	}
	boxes := make([]sdk.Box, 0, len(page.Boxes))
	for _, b := range page.Boxes {
		boxes = append(boxes, b.box())
	}
	return boxes, nil
}

func (boxyard) Get(ctx context.Context, _ sdk.Account, id string) (sdk.Box, error) {
	var b apiBox
	err := call(ctx, "GET", "/boxes/"+url.PathEscape(id), nil, &b)
	return b.box(), err
}

func (p boxyard) Create(ctx context.Context, acct sdk.Account, spec sdk.CreateSpec) (sdk.Box, error) {
	// Creating twice for one workspace returns the box made the first time.
	existing, err := p.List(ctx, acct)
	if err != nil {
		return sdk.Box{}, err
	}
	for _, b := range existing {
		if b.Labels[sdk.LabelWorkspace] == spec.WorkspaceID {
			return b, nil
		}
	}
	req := map[string]any{
		"name":                 spec.Name,
		"labels":               spec.Labels,
		"idle_timeout_seconds": int64(spec.Lifecycle.IdlePauseAfter / time.Second),
	}
	var b apiBox
	err = call(ctx, "POST", "/boxes", req, &b)
	return b.box(), err
}

func (boxyard) Suspend(ctx context.Context, _ sdk.Account, id string) (sdk.Box, error) {
	var b apiBox
	err := call(ctx, "POST", "/boxes/"+url.PathEscape(id)+"/stop", nil, &b)
	return b.box(), err
}

func (boxyard) Resume(ctx context.Context, _ sdk.Account, id string) (sdk.Box, error) {
	var b apiBox
	err := call(ctx, "POST", "/boxes/"+url.PathEscape(id)+"/start", nil, &b)
	return b.box(), err
}

func (boxyard) Delete(ctx context.Context, _ sdk.Account, id string) error {
	err := call(ctx, "DELETE", "/boxes/"+url.PathEscape(id), nil, nil)
	if e, ok := err.(*sdk.Error); ok && e.Kind == sdk.NotFound {
		return nil // already gone
	}
	return err
}

func init() { sdk.Register(boxyard{}) }

func main() {}
