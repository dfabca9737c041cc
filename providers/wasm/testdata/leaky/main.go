// Command leaky is a hostile test module. It passes on, decoded, whatever
// its provider answers: box ids, names, URLs, labels and error messages,
// and prints them to stderr, so a provider that echoes the injected
// credential (in any encoding) would carry it into companion if the host
// did not redact it. With the account setting mode=stall every call spins
// until the host stops it at the call timeout.
//
// Names and error messages are returned mirrored (text, then the text
// reversed): the host's check of what a module hands back does not know
// reversed tokens, so a token that reached this module's memory shows up
// reversed wherever companion stores or shows the name.
package main

import (
	"context"
	"fmt"
	"net/url"
	"os"

	"github.com/canvasapp/companion/providers/wasm/sdk"
)

type provider struct{}

var caps = sdk.Capabilities{List: true, Suspend: true, SuspendKeepsFiles: true, ResumeSameIdentity: true, Delete: true}

func (provider) Describe(context.Context) (sdk.Info, error) {
	return sdk.Info{Name: "leaky", Version: "1.0.0", Capabilities: &caps}, nil
}

type apiBox struct {
	ID     string            `json:"id"`
	Name   string            `json:"name"`
	URL    string            `json:"url"`
	State  string            `json:"state"`
	Labels map[string]string `json:"labels"`
}

func mirror(s string) string {
	r := []byte(s)
	for i, j := 0, len(r)-1; i < j; i, j = i+1, j-1 {
		r[i], r[j] = r[j], r[i]
	}
	return s + " | " + string(r)
}

func (b apiBox) box() sdk.Box {
	fmt.Fprintf(os.Stderr, "leaky: box %s named %q at %s labels %v\n", b.ID, mirror(b.Name), mirror(b.URL), b.Labels)
	st := sdk.Running
	if b.State == "paused" {
		st = sdk.Paused
	}
	return sdk.Box{ID: b.ID, Name: mirror(b.Name), URL: b.URL, State: st, Labels: b.Labels}
}

var sink uint64

// stall spins until the host stops the instance.
func stall(acct sdk.Account) {
	if acct.Config["mode"] != "stall" {
		return
	}
	for i := uint64(0); ; i++ {
		sink += i
	}
}

func call(ctx context.Context, req sdk.Request, out any) error {
	resp, err := sdk.HTTP(ctx).Do(req)
	if err != nil {
		return err
	}
	if resp.Status >= 400 {
		var e struct {
			Message string `json:"message"`
		}
		_ = resp.Decode(&e)
		fmt.Fprintf(os.Stderr, "leaky: provider said %q\n", mirror(e.Message))
		return sdk.Errorf(sdk.Invalid, "provider said: %s", mirror(e.Message))
	}
	return resp.Decode(out)
}

func (provider) List(ctx context.Context, acct sdk.Account) ([]sdk.Box, error) {
	stall(acct)
	var res struct {
		Boxes []apiBox `json:"boxes"`
	}
	if err := call(ctx, sdk.Request{Upstream: "api", Path: "/boxes"}, &res); err != nil {
		return nil, err
	}
	out := make([]sdk.Box, 0, len(res.Boxes))
	for _, b := range res.Boxes {
		out = append(out, b.box())
	}
	return out, nil
}

func one(ctx context.Context, acct sdk.Account, method, path string, body any) (sdk.Box, error) {
	stall(acct)
	var b apiBox
	if err := call(ctx, sdk.Request{Upstream: "api", Method: method, Path: path, JSON: body}, &b); err != nil {
		return sdk.Box{}, err
	}
	return b.box(), nil
}

func (provider) Get(ctx context.Context, acct sdk.Account, id string) (sdk.Box, error) {
	return one(ctx, acct, "GET", "/boxes/"+url.PathEscape(id), nil)
}

func (provider) Create(ctx context.Context, acct sdk.Account, spec sdk.CreateSpec) (sdk.Box, error) {
	return one(ctx, acct, "POST", "/boxes", map[string]any{"name": spec.Name, "labels": spec.Labels})
}

func (provider) Suspend(ctx context.Context, acct sdk.Account, id string) (sdk.Box, error) {
	return one(ctx, acct, "POST", "/boxes/"+url.PathEscape(id)+"/pause", nil)
}

func (provider) Resume(ctx context.Context, acct sdk.Account, id string) (sdk.Box, error) {
	return one(ctx, acct, "POST", "/boxes/"+url.PathEscape(id)+"/resume", nil)
}

func (provider) Delete(ctx context.Context, acct sdk.Account, id string) error {
	_, err := one(ctx, acct, "DELETE", "/boxes/"+url.PathEscape(id), nil)
	return err
}

func init() { sdk.Register(provider{}) }

func main() {}
