package sdk

import (
	"context"
	"encoding/json"
	"testing"
)

type epProvider struct{ Unimplemented }

func (epProvider) Endpoint(_ context.Context, _ Account, id string) (Endpoint, error) {
	return Endpoint{URL: "https://8000-" + id + ".proxy.example", Headers: map[string]string{"X-Preview-Token": "t\"1"}}, nil
}

func TestDispatchEndpoint(t *testing.T) {
	old := registered
	defer func() { registered = old }()

	registered = epProvider{}
	var got struct {
		OK struct {
			Endpoint struct {
				URL     string            `json:"url"`
				Headers map[string]string `json:"headers"`
			} `json:"endpoint"`
		} `json:"ok"`
	}
	out := Dispatch("endpoint", []byte(`{"deadline_unix_ms":0,"account":{"id":"a","config":{}},"box_id":"b1"}`))
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%s: %v", out, err)
	}
	if got.OK.Endpoint.URL != "https://8000-b1.proxy.example" || got.OK.Endpoint.Headers["X-Preview-Token"] != "t\"1" {
		t.Fatalf("result %s", out)
	}

	// A provider without Endpointer (an ABI v1 module's shape) says so.
	registered = Unimplemented{}
	var e struct {
		Error struct{ Kind, Message string } `json:"error"`
	}
	out = Dispatch("endpoint", []byte(`{"deadline_unix_ms":0,"account":{"id":"a","config":{}},"box_id":"b1"}`))
	if err := json.Unmarshal(out, &e); err != nil || e.Error.Kind != "invalid" {
		t.Fatalf("unsupported endpoint: %s (%v)", out, err)
	}
}
