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

type keyProvider struct {
	Unimplemented
	got *CreateSpec
}

func (p keyProvider) Create(_ context.Context, _ Account, spec CreateSpec) (Box, error) {
	*p.got = spec
	return Box{ID: "b", State: Running, Labels: spec.Labels}, nil
}

func TestCreateSpecAgentKey(t *testing.T) {
	old := registered
	defer func() { registered = old }()
	var got CreateSpec
	registered = keyProvider{got: &got}
	Dispatch("create", []byte(`{"deadline_unix_ms":0,"account":{"id":"a","config":{}},"spec":{"workspace_id":"ws1","name":"n","options":{},"labels":{"companion.workspace":"ws1"},"agent_key":"k-123"}}`))
	if got.AgentKey != "k-123" || got.WorkspaceID != "ws1" {
		t.Fatalf("spec %+v", got)
	}
	// Input from a host that predates agent_key: empty, nothing else lost.
	Dispatch("create", []byte(`{"deadline_unix_ms":0,"account":{"id":"a","config":{}},"spec":{"workspace_id":"ws2","name":"n","options":{},"labels":{}}}`))
	if got.AgentKey != "" || got.WorkspaceID != "ws2" {
		t.Fatalf("spec %+v", got)
	}
}
