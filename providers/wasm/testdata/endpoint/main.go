// Command endpoint is a provider module that reports agent-server
// endpoints (op endpoint). Its URL comes from the account's "answer"
// setting, so a test can make it return a URL inside or outside the hosts
// its manifest declares.
package main

import (
	"context"
	"strings"

	"github.com/canvasapp/companion/providers/wasm/sdk"
)

type provider struct{ sdk.Unimplemented }

func (provider) Describe(context.Context) (sdk.Info, error) {
	return sdk.Info{Name: "reach", Version: "1.0.0"}, nil
}

func (provider) List(context.Context, sdk.Account) ([]sdk.Box, error) { return []sdk.Box{}, nil }

func (provider) Endpoint(_ context.Context, acct sdk.Account, id string) (sdk.Endpoint, error) {
	answer := acct.Config["answer"]
	if answer == "" {
		answer = "https://8000-{id}.proxy.reach.example"
	}
	header := acct.Config["header"]
	if header == "" {
		header = "x-preview-token"
	}
	return sdk.Endpoint{
		URL:     strings.ReplaceAll(answer, "{id}", id),
		Headers: map[string]string{header: "preview-" + id},
	}, nil
}

func init() { sdk.Register(provider{}) }

func main() {}
