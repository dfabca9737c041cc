package engine

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// Filters is the engine's filter argument: name → accepted values.
type Filters map[string][]string

func (f Filters) encode() string {
	m := make(map[string]map[string]bool, len(f))
	for k, vs := range f {
		m[k] = map[string]bool{}
		for _, v := range vs {
			m[k][v] = true
		}
	}
	b, _ := json.Marshal(m)
	return string(b)
}

// ContainerList is GET /containers/json?all=1 with filters.
func (c *Client) ContainerList(ctx context.Context, all bool, f Filters) ([]Summary, error) {
	q := url.Values{}
	if all {
		q.Set("all", "1")
	}
	if len(f) > 0 {
		q.Set("filters", f.encode())
	}
	var out []Summary
	return out, c.call(ctx, http.MethodGet, "/containers/json", q, nil, &out)
}

// ContainerInspect is GET /containers/{id}/json.
func (c *Client) ContainerInspect(ctx context.Context, id string) (Inspect, error) {
	var out Inspect
	return out, c.call(ctx, http.MethodGet, "/containers/"+url.PathEscape(id)+"/json", nil, nil, &out)
}

// ContainerCreate is POST /containers/create?name=; it returns the new id.
func (c *Client) ContainerCreate(ctx context.Context, name string, cfg *Config, hc *HostConfig) (string, error) {
	body := struct {
		*Config
		HostConfig *HostConfig `json:"HostConfig,omitempty"`
	}{cfg, hc}
	q := url.Values{}
	if name != "" {
		q.Set("name", name)
	}
	var out struct {
		ID string `json:"Id"`
	}
	if err := c.call(ctx, http.MethodPost, "/containers/create", q, body, &out); err != nil {
		return "", err
	}
	return out.ID, nil
}

// ContainerStart is POST /containers/{id}/start.
func (c *Client) ContainerStart(ctx context.Context, id string) error {
	return c.call(ctx, http.MethodPost, "/containers/"+url.PathEscape(id)+"/start", nil, nil, nil)
}

// ContainerStop is POST /containers/{id}/stop: SIGTERM (or the image's
// stop signal), then SIGKILL after timeout seconds; a negative timeout is
// the engine's default.
func (c *Client) ContainerStop(ctx context.Context, id string, timeout int) error {
	q := url.Values{}
	if timeout >= 0 {
		q.Set("t", strconv.Itoa(timeout))
	}
	return c.call(ctx, http.MethodPost, "/containers/"+url.PathEscape(id)+"/stop", q, nil, nil)
}

// ContainerUnpause is POST /containers/{id}/unpause.
func (c *Client) ContainerUnpause(ctx context.Context, id string) error {
	return c.call(ctx, http.MethodPost, "/containers/"+url.PathEscape(id)+"/unpause", nil, nil, nil)
}

// ContainerRemove is DELETE /containers/{id}; force kills a running one,
// volumes removes its anonymous volumes.
func (c *Client) ContainerRemove(ctx context.Context, id string, force, volumes bool) error {
	q := url.Values{}
	if force {
		q.Set("force", "1")
	}
	if volumes {
		q.Set("v", "1")
	}
	return c.call(ctx, http.MethodDelete, "/containers/"+url.PathEscape(id), q, nil, nil)
}

// ContainerChanges is GET /containers/{id}/changes.
func (c *Client) ContainerChanges(ctx context.Context, id string) ([]FilesystemChange, error) {
	var out []FilesystemChange
	return out, c.call(ctx, http.MethodGet, "/containers/"+url.PathEscape(id)+"/changes", nil, nil, &out)
}

// CopyFromContainer is GET /containers/{id}/archive?path=: a tar of src,
// its entries named from src's base name. The caller closes it.
func (c *Client) CopyFromContainer(ctx context.Context, id, src string) (io.ReadCloser, error) {
	resp, err := c.request(ctx, http.MethodGet, "/containers/"+url.PathEscape(id)+"/archive", url.Values{"path": {src}}, nil, "")
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}

// CopyToContainer is PUT /containers/{id}/archive?path=: content is a tar
// extracted into the directory dst. A directory is never replaced by a
// file or the other way round; copyUIDGID keeps the tar's owners.
func (c *Client) CopyToContainer(ctx context.Context, id, dst string, content io.Reader, copyUIDGID bool) error {
	q := url.Values{"path": {dst}, "noOverwriteDirNonDir": {"true"}}
	if copyUIDGID {
		q.Set("copyUIDGID", "true")
	}
	resp, err := c.request(ctx, http.MethodPut, "/containers/"+url.PathEscape(id)+"/archive", q, content, "application/x-tar")
	if err != nil {
		return err
	}
	drain(resp)
	return nil
}

// ImageInspect is GET /images/{name}/json; it returns the image id.
func (c *Client) ImageInspect(ctx context.Context, name string) (string, error) {
	var out struct {
		ID string `json:"Id"`
	}
	// The name may hold '/' (a repository path): not escaped.
	return out.ID, c.call(ctx, http.MethodGet, "/images/"+name+"/json", nil, nil, &out)
}

// ImagePull is POST /images/create?fromImage=&tag=. The answer is a
// stream of PullMessage (see DecodePull); a failed pull often answers
// 200 and reports its error in the stream. The caller closes it.
func (c *Client) ImagePull(ctx context.Context, ref string) (io.ReadCloser, error) {
	name, tag := splitRef(ref)
	q := url.Values{"fromImage": {name}, "tag": {tag}}
	resp, err := c.request(ctx, http.MethodPost, "/images/create", q, nil, "")
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}

// splitRef splits an image reference into name and tag (or digest). A
// reference without either is its "latest" tag: an empty tag would pull
// every tag of the repository.
func splitRef(ref string) (name, tag string) {
	if n, d, ok := strings.Cut(ref, "@"); ok {
		return n, d
	}
	slash := strings.LastIndex(ref, "/")
	if i := strings.LastIndex(ref, ":"); i > slash {
		return ref[:i], ref[i+1:]
	}
	return ref, "latest"
}

// DecodePull calls fn for each message of a pull stream until it ends, fn
// returns an error, or the stream reports a failure (returned as an
// *Error with status 500 and the engine's message).
func DecodePull(r io.Reader, fn func(PullMessage) error) error {
	dec := json.NewDecoder(r)
	for {
		var m PullMessage
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if msg := m.ErrorMessage(); msg != "" {
			return &Error{StatusCode: http.StatusInternalServerError, Message: msg}
		}
		if err := fn(m); err != nil {
			return err
		}
	}
}

// VolumeRemove is DELETE /volumes/{name}.
func (c *Client) VolumeRemove(ctx context.Context, name string) error {
	return c.call(ctx, http.MethodDelete, "/volumes/"+url.PathEscape(name), nil, nil, nil)
}

// Events is GET /events between since and until (the engine's
// "seconds.nanoseconds" form); until must be given, so that the engine
// ends the stream and the whole answer is returned.
func (c *Client) Events(ctx context.Context, since, until string, f Filters) ([]Event, error) {
	if until == "" {
		return nil, fmt.Errorf("events: until is required")
	}
	q := url.Values{"until": {until}}
	if since != "" {
		q.Set("since", since)
	}
	if len(f) > 0 {
		q.Set("filters", f.encode())
	}
	resp, err := c.request(ctx, http.MethodGet, "/events", q, nil, "")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var out []Event
	dec := json.NewDecoder(resp.Body)
	for {
		var e Event
		if err := dec.Decode(&e); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return out, err
		}
		out = append(out, e)
	}
}

// DiskUsage is GET /system/df for containers and volumes. The type filter
// (API 1.42+) spares images and build cache; older engines ignore it.
// Engines from API 1.52 answer in another shape, with items only when
// verbose.
func (c *Client) DiskUsage(ctx context.Context) (DiskUsage, error) {
	q := url.Values{"type": {"container", "volume"}, "verbose": {"1"}}
	var raw struct {
		// Up to API 1.51.
		Containers []ContainerUsage `json:"Containers"`
		Volumes    []VolumeUsage    `json:"Volumes"`
		// From API 1.52.
		ContainerUsage *struct {
			Items []ContainerUsage `json:"Items"`
		} `json:"ContainerUsage"`
		VolumeUsage *struct {
			Items []VolumeUsage `json:"Items"`
		} `json:"VolumeUsage"`
	}
	if err := c.call(ctx, http.MethodGet, "/system/df", q, nil, &raw); err != nil {
		return DiskUsage{}, err
	}
	du := DiskUsage{Containers: raw.Containers, Volumes: raw.Volumes}
	if raw.ContainerUsage != nil {
		du.Containers = append(du.Containers, raw.ContainerUsage.Items...)
	}
	if raw.VolumeUsage != nil {
		du.Volumes = append(du.Volumes, raw.VolumeUsage.Items...)
	}
	return du, nil
}

// Exec runs cmd in the running container id (POST /containers/{id}/exec,
// then POST /exec/{id}/start attached) and returns its exit code and the
// start of its output (stdout and stderr, interleaved), read until the
// command ends. A command that cannot be started (not found in the image)
// exits 126 or 127.
func (c *Client) Exec(ctx context.Context, id string, cmd []string) (exitCode int, output string, err error) {
	var created struct {
		ID string `json:"Id"`
	}
	in := map[string]any{"Cmd": cmd, "AttachStdout": true, "AttachStderr": true}
	if err := c.call(ctx, http.MethodPost, "/containers/"+url.PathEscape(id)+"/exec", nil, in, &created); err != nil {
		return 0, "", err
	}
	b, _ := json.Marshal(map[string]any{"Detach": false, "Tty": false})
	resp, err := c.request(ctx, http.MethodPost, "/exec/"+url.PathEscape(created.ID)+"/start", nil, bytes.NewReader(b), "application/json")
	if err != nil {
		return 0, "", err
	}
	// The answer streams until the command ends; keep its start for the
	// caller's message.
	head, err := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	if err == nil {
		_, err = io.Copy(io.Discard, resp.Body)
	}
	resp.Body.Close()
	if err != nil {
		return 0, "", fmt.Errorf("read the output of exec %s: %w", created.ID, err)
	}
	var ins struct {
		Running  bool
		ExitCode int
	}
	if err := c.call(ctx, http.MethodGet, "/exec/"+url.PathEscape(created.ID)+"/json", nil, nil, &ins); err != nil {
		return 0, "", err
	}
	if ins.Running {
		return 0, "", fmt.Errorf("exec %s still runs after its output ended", created.ID)
	}
	return ins.ExitCode, demux(head), nil
}

// demux joins the payloads of an attached, non-TTY stream: frames of an
// 8-byte header (stream, three zero bytes, big-endian length) and their
// bytes. A frame cut off at the end of b keeps what b holds of it.
func demux(b []byte) string {
	var out []byte
	for len(b) >= 8 {
		n := int(binary.BigEndian.Uint32(b[4:8]))
		b = b[8:]
		n = min(n, len(b))
		out = append(out, b[:n]...)
		b = b[n:]
	}
	return string(out)
}
