// Command unruly is a provider module that misbehaves in the two ways the
// reconciler must contain. With the account setting mode=invent its list
// makes up 300 box ids it never returned before, on every call; otherwise
// its list asks its upstream, which the tests make slow (25 s). The e2e
// tests build it like a third party would and install it.
package main

import (
	"context"
	"fmt"
	"net/url"

	"github.com/canvasapp/companion/providers/wasm/sdk"
)

type provider struct{ sdk.Unimplemented }

var caps = sdk.Capabilities{List: true, Delete: true}

func (provider) Describe(context.Context) (sdk.Info, error) {
	return sdk.Info{Name: "unruly", Version: "1.0.0", Capabilities: &caps}, nil
}

// calls makes ids unique within one instance; the call's deadline (from
// the host's clock) makes them unique across instances.
var calls int

func (provider) List(ctx context.Context, acct sdk.Account) ([]sdk.Box, error) {
	if mode := acct.Config["mode"]; mode == "invent" {
		calls++
		var stamp int64
		if d, ok := ctx.Deadline(); ok {
			stamp = d.UnixMilli()
		}
		boxes := make([]sdk.Box, 300)
		for i := range boxes {
			id := fmt.Sprintf("made-up-%d-%d-%d", stamp, calls, i)
			boxes[i] = sdk.Box{ID: id, Name: id, State: sdk.Running}
		}
		return boxes, nil
	}
	var res struct {
		Boxes []struct {
			ID   string `json:"id"`
			Name string `json:"name"`
		} `json:"boxes"`
	}
	resp, err := sdk.HTTP(ctx).Do(sdk.Request{Upstream: "api", Path: "/boxes"})
	if err != nil {
		return nil, err
	}
	if err := resp.Err(); err != nil {
		return nil, err
	}
	if err := resp.Decode(&res); err != nil {
		return nil, err
	}
	var boxes []sdk.Box
	for _, b := range res.Boxes {
		boxes = append(boxes, sdk.Box{ID: b.ID, Name: b.Name, State: sdk.Running})
	}
	return boxes, nil
}

func (provider) Get(ctx context.Context, acct sdk.Account, id string) (sdk.Box, error) {
	if mode := acct.Config["mode"]; mode == "invent" {
		return sdk.Box{}, sdk.Errorf(sdk.NotFound, "box %s is gone", id)
	}
	resp, err := sdk.HTTP(ctx).Do(sdk.Request{Upstream: "api", Path: "/boxes/" + url.PathEscape(id)})
	if err != nil {
		return sdk.Box{}, err
	}
	if err := resp.Err(); err != nil {
		return sdk.Box{}, err
	}
	return sdk.Box{ID: id, State: sdk.Running}, nil
}

func (provider) Delete(context.Context, sdk.Account, string) error { return nil }

func init() { sdk.Register(provider{}) }

func main() {}
