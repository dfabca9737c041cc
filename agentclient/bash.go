package agentclient

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path"
)

// BashResult is the answer of POST /api/bash/execute_bash_command: the
// LAST output chunk of the command with its exit code. Upstream splits
// output into chunks of about a million characters and answers only the
// last one, and decodes it as UTF-8 with replacement per read: a caller
// that needs all of a long or binary output must write it to a file and
// download that.
type BashResult struct {
	ExitCode *int    `json:"exit_code"`
	Stdout   *string `json:"stdout"`
	Stderr   *string `json:"stderr"`
	Order    int     `json:"order"`
}

// ExecuteBash runs command with /bin/sh in the box (cwd "" is the
// server's own working directory) and waits for it, at most timeout
// seconds (0: upstream's default of 300); a command that timed out has
// exit code -1. It moves the box's idle clock: call it only for a
// person's action.
func (c *Client) ExecuteBash(ctx context.Context, command, cwd string, timeout int) (BashResult, error) {
	const op = "POST /api/bash/execute_bash_command"
	if cwd != "" && !path.IsAbs(cwd) {
		return BashResult{}, fmt.Errorf("execute bash: cwd must be absolute, got %q", cwd)
	}
	req := map[string]any{"command": command}
	if cwd != "" {
		req["cwd"] = cwd
	}
	if timeout > 0 {
		req["timeout"] = timeout
	}
	b, err := json.Marshal(req)
	if err != nil {
		return BashResult{}, fmt.Errorf("execute bash: %w", err)
	}
	resp, err := c.send(ctx, op, http.MethodPost, "/api/bash/execute_bash_command", nil, bytes.NewReader(b), "application/json", false)
	if err != nil {
		return BashResult{}, err
	}
	defer resp.Body.Close()
	var out BashResult
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return BashResult{}, &Error{Op: op, Status: resp.StatusCode, Class: ClassRetryable, Err: fmt.Errorf("decode answer: %w", err)}
	}
	if out.ExitCode == nil {
		return out, &Error{Op: op, Status: resp.StatusCode, Class: ClassRetryable, Err: fmt.Errorf("the answer has no exit code")}
	}
	return out, nil
}
