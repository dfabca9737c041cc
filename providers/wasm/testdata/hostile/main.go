// Command hostile is a provider module that misbehaves on purpose. The
// account setting "behavior" picks what list does; every behaviour must be
// contained by the host (see hostile_test.go).
package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/canvasapp/companion/providers/wasm/sdk"
)

type provider struct{ sdk.Unimplemented }

func (provider) Describe(context.Context) (sdk.Info, error) {
	return sdk.Info{Name: "hostile", Version: "0.0.1"}, nil
}

var hoard [][]byte

func recurse(n int) int {
	var pad [256]byte
	pad[n%256] = byte(n)
	return recurse(n+1) + int(pad[(n+1)%256])
}

func do(ctx context.Context, req sdk.Request) (*sdk.Response, error) {
	return sdk.HTTP(ctx).Do(req)
}

func (provider) List(ctx context.Context, acct sdk.Account) ([]sdk.Box, error) {
	switch acct.Config["behavior"] {
	case "loop":
		n := 0
		for {
			n++
			if n < 0 {
				break
			}
		}
		return nil, nil
	case "memory":
		for {
			hoard = append(hoard, make([]byte, 1<<20))
		}
	case "recursion":
		return nil, fmt.Errorf("%d", recurse(0))
	case "block":
		time.Sleep(time.Hour)
		return nil, nil
	case "deadlock":
		select {}
	case "exit":
		os.Exit(3)
	case "panic":
		var m map[string]int
		m["x"] = 1
	case "undeclared":
		_, err := do(ctx, sdk.Request{Upstream: "evil", Path: "/"})
		return nil, err
	case "ignore_violation":
		// Break a rule, swallow the refusal and claim success.
		_, _ = do(ctx, sdk.Request{Upstream: "evil", Path: "/"})
		return []sdk.Box{}, nil
	case "redirect":
		_, err := do(ctx, sdk.Request{Upstream: "api", Path: "/redirect"})
		return nil, err
	case "private":
		_, err := do(ctx, sdk.Request{Upstream: "internal", Path: "/"})
		return nil, err
	case "response_bomb":
		_, err := do(ctx, sdk.Request{Upstream: "api", Path: "/bomb"})
		return nil, err
	case "flood":
		for i := 0; i < 1000; i++ {
			if _, err := do(ctx, sdk.Request{Upstream: "api", Path: "/ok"}); err != nil {
				return nil, err
			}
		}
		return nil, nil
	case "authorization":
		_, err := do(ctx, sdk.Request{Upstream: "api", Path: "/ok", Headers: map[string]string{"authorization": "Bearer mine"}})
		return nil, err
	case "credential_header":
		_, err := do(ctx, sdk.Request{Upstream: "api", Path: "/ok", Headers: map[string]string{"X-Api-Key": "mine"}})
		return nil, err
	case "file":
		var got []string
		for _, p := range []string{"/etc/passwd", "/proc/self/environ", ".", "/", "manifest.json"} {
			b, err := os.ReadFile(p)
			if err == nil {
				return []sdk.Box{{ID: "leak", Name: string(b), State: sdk.Running}}, nil
			}
			got = append(got, err.Error())
		}
		if env := os.Environ(); len(env) > 0 {
			return []sdk.Box{{ID: "leak", Name: strings.Join(env, ","), State: sdk.Running}}, nil
		}
		return nil, sdk.Errorf(sdk.Unavailable, "no files: %s", strings.Join(got, "; "))
	case "echo":
		// The test server echoes the request headers; try to smuggle the
		// token out through a box name and an error message.
		resp, err := do(ctx, sdk.Request{Upstream: "api", Path: "/echo"})
		if err != nil {
			return nil, err
		}
		if acct.Config["via"] == "error" {
			return nil, sdk.Errorf(sdk.Invalid, "echo: %s", resp.Body)
		}
		fmt.Fprintf(os.Stderr, "echoed: %s\n", resp.Body)
		return []sdk.Box{{ID: "echo", Name: string(resp.Body), State: sdk.Running}}, nil
	case "chatty":
		fmt.Println("hello from the guest")
		for i := 0; i < 20000; i++ {
			fmt.Fprintf(os.Stderr, "noise line %d\n", i)
		}
		return []sdk.Box{}, nil
	case "fine":
		return []sdk.Box{}, nil
	}
	return nil, sdk.Errorf(sdk.Invalid, "unknown behavior %q", acct.Config["behavior"])
}

func init() { sdk.Register(provider{}) }

func main() {}
