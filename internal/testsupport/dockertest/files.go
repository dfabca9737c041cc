package dockertest

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"path/filepath"
	"strings"

	"github.com/moby/moby/client"
)

// PutFiles writes files (path relative to dest → content) into container
// id through the Engine API, with mode, making the directories on the way
// (mode 0755). It goes around the box's agent, as a user's own tools would.
func PutFiles(ctx context.Context, cli *client.Client, id, dest string, files map[string]string, mode int64) error {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dirs := map[string]bool{}
	for name := range files {
		for d := filepath.Dir(name); d != "." && !dirs[d]; d = filepath.Dir(d) {
			dirs[d] = true
		}
	}
	for d := range dirs {
		tw.WriteHeader(&tar.Header{Name: d + "/", Mode: 0o755, Typeflag: tar.TypeDir})
	}
	for name, content := range files {
		tw.WriteHeader(&tar.Header{Name: name, Mode: mode, Size: int64(len(content)), Typeflag: tar.TypeReg})
		tw.Write([]byte(content))
	}
	tw.Close()
	_, err := cli.CopyToContainer(ctx, id, client.CopyToContainerOptions{DestinationPath: dest, Content: &buf})
	return err
}

// ReadFile reads one file of container id through the Engine API.
func ReadFile(ctx context.Context, cli *client.Client, id, path string) (string, error) {
	res, err := cli.CopyFromContainer(ctx, id, client.CopyFromContainerOptions{SourcePath: path})
	if err != nil {
		return "", err
	}
	defer res.Content.Close()
	tr := tar.NewReader(res.Content)
	if _, err := tr.Next(); err != nil {
		return "", err
	}
	b, err := io.ReadAll(tr)
	return string(b), err
}

// ReadTree reads every regular file below dir of container id in one
// Engine API call: paths relative to dir → contents, with their modes.
func ReadTree(ctx context.Context, cli *client.Client, id, dir string) (map[string]string, map[string]int64, error) {
	res, err := cli.CopyFromContainer(ctx, id, client.CopyFromContainerOptions{SourcePath: dir})
	if err != nil {
		return nil, nil, err
	}
	defer res.Content.Close()
	files, modes := map[string]string{}, map[string]int64{}
	tr := tar.NewReader(res.Content)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files, modes, nil
		}
		if err != nil {
			return nil, nil, err
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		// The archive is rooted at dir's base name.
		_, rel, _ := strings.Cut(h.Name, "/")
		b, err := io.ReadAll(tr)
		if err != nil {
			return nil, nil, err
		}
		files[rel], modes[rel] = string(b), h.Mode
	}
}

// Exec runs cmd in the running container id and returns its exit code and
// output once it ends, as `docker exec` would for a person.
func Exec(ctx context.Context, cli *client.Client, id string, cmd ...string) (int, string, error) {
	created, err := cli.ExecCreate(ctx, id, client.ExecCreateOptions{Cmd: cmd, AttachStdout: true, AttachStderr: true})
	if err != nil {
		return 0, "", err
	}
	att, err := cli.ExecAttach(ctx, created.ID, client.ExecAttachOptions{})
	if err != nil {
		return 0, "", err
	}
	out, err := io.ReadAll(att.Reader)
	att.Close()
	if err != nil {
		return 0, "", err
	}
	ins, err := cli.ExecInspect(ctx, created.ID, client.ExecInspectOptions{})
	if err != nil {
		return 0, "", err
	}
	return ins.ExitCode, string(out), nil
}
