package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"
)

// The git-delta format and the repository headers through the git binary,
// with the commands upstream runs, in its order. The box image has no git;
// there gitDeltaPure and the pure-Go metadata stand in (EMULATOR_PURE_GIT
// forces them).

// emptyTree is git's well-known empty tree object.
const emptyTree = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"

// errNotRepo is upstream's GitRepositoryError: the root is not inside a
// git work tree (a 400).
var errNotRepo = errors.New("not a git repository")

// badRef is an explicit base_ref that does not resolve (a 400).
type badRef struct{ ref string }

func (b badRef) Error() string { return "cannot resolve " + b.ref }

// gitCommandError is upstream's GitCommandError from building the patch
// (a 500): message is what the answer shows, detail what git said.
type gitCommandError struct{ message, detail string }

func (e gitCommandError) Error() string { return e.message + ": " + e.detail }

// gitCmd runs git in a directory.
type gitCmd struct {
	dir string
	env []string // added to the process environment
}

func newGitCmd(dir, ceiling string) gitCmd {
	// No terminal prompts: a server in a box has no terminal, and a test
	// run from one must not stop on a credential or host-key question.
	env := []string{"GIT_TERMINAL_PROMPT=0"}
	if os.Getenv("GIT_SSH_COMMAND") == "" && os.Getenv("GIT_SSH") == "" {
		env = append(env, "GIT_SSH_COMMAND=ssh -o BatchMode=yes")
	}
	if ceiling != "" {
		env = append(env, "GIT_CEILING_DIRECTORIES="+ceiling)
	}
	return gitCmd{dir: dir, env: env}
}

// run returns git's trimmed stdout; a non-zero exit is an error carrying
// its stderr. timeout is upstream's for the command.
func (g gitCmd) run(ctx context.Context, timeout time.Duration, extraEnv []string, stdout io.Writer, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = g.dir
	cmd.Env = append(append(os.Environ(), g.env...), extraEnv...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if stdout != nil {
		cmd.Stdout = stdout
	}
	if err := cmd.Run(); err != nil {
		if ctx.Err() == context.DeadlineExceeded {
			err = errTimedOut
		}
		return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
	}
	return strings.TrimSpace(out.String()), nil
}

var errTimedOut = errors.New("timed out")

// probe is upstream's run_git_command (30 s, with --no-pager).
func (g gitCmd) probe(ctx context.Context, args ...string) (string, error) {
	return g.run(ctx, 30*time.Second, nil, nil, append([]string{"--no-pager"}, args...)...)
}

// gitDelta writes upstream's git-delta of root: a scratch index seeded
// from the base, `git add -A -- . <excludes>` on top, then
// `git diff --binary --cached <base> -- . <excludes>`. It returns the base
// commit, "" for the empty tree.
func gitDelta(ctx context.Context, out *os.File, root string, baseRef *string, excludes []string, ceiling string) (string, error) {
	g := newGitCmd(root, ceiling)
	if _, err := g.run(ctx, 30*time.Second, nil, nil, "rev-parse", "--git-dir"); err != nil {
		return "", errNotRepo
	}
	ref, err := binBase(ctx, g, baseRef)
	if err != nil {
		return "", err
	}
	index := out.Name() + ".index"
	defer os.Remove(index)
	env := []string{"GIT_INDEX_FILE=" + index}
	specs := excludePathspecs(excludes)
	fail := func(err error) error {
		if errors.Is(err, errTimedOut) {
			return gitCommandError{"Timed out generating git delta", err.Error()}
		}
		return gitCommandError{"Failed to generate git delta", err.Error()}
	}
	if _, err := g.run(ctx, 60*time.Second, env, nil, "read-tree", ref); err != nil {
		return "", fail(err)
	}
	if _, err := g.run(ctx, 300*time.Second, env, nil, append([]string{"add", "-A", "--", "."}, specs...)...); err != nil {
		return "", fail(err)
	}
	if _, err := g.run(ctx, 300*time.Second, env, out, append([]string{"diff", "--binary", "--cached", ref, "--", "."}, specs...)...); err != nil {
		return "", fail(err)
	}
	if ref == emptyTree {
		return "", nil
	}
	commit, err := g.probe(ctx, "rev-parse", "--verify", ref+"^{commit}")
	if err != nil {
		return "", nil
	}
	return commit, nil
}

// binBase picks the base as upstream's get_valid_ref does for export: the
// explicit base_ref (HEAD when HEAD is detached); else, with any commit in
// the repository, the first that resolves of origin/<current branch>,
// origin/<remote's default branch> and their merge base (the default
// branch is asked of the remote itself with `git remote show origin`, a
// network call that fails offline); else the empty tree.
func binBase(ctx context.Context, g gitCmd, baseRef *string) (string, error) {
	if baseRef == nil {
		if b, err := g.probe(ctx, "rev-parse", "--abbrev-ref", "HEAD"); err == nil && b == "HEAD" {
			head := "HEAD"
			baseRef = &head
		}
	}
	if baseRef != nil {
		sha, err := g.probe(ctx, "rev-parse", "--verify", *baseRef+"^{commit}")
		switch {
		case err == nil:
			return sha, nil
		case *baseRef == "HEAD":
			return emptyTree, nil // no commit on this branch yet
		}
		return "", badRef{*baseRef}
	}
	if n, err := g.probe(ctx, "rev-list", "--count", "--all"); err != nil || n == "0" {
		return emptyTree, nil
	}
	var try []string
	if b, err := g.probe(ctx, "rev-parse", "--abbrev-ref", "HEAD"); err == nil && b != "" && b != "HEAD" {
		try = append(try, "origin/"+b)
	}
	if info, err := g.probe(ctx, "remote", "show", "origin"); err == nil {
		if def := remoteHeadBranch(info); def != "" {
			try = append(try, "origin/"+def)
			if mb, err := g.probe(ctx, "merge-base", "HEAD", "origin/"+def); err == nil && mb != "" {
				try = append(try, mb)
			}
		}
	}
	for _, ref := range try {
		if sha, err := g.probe(ctx, "rev-parse", "--verify", ref); err == nil && sha != "" {
			return sha, nil
		}
	}
	return emptyTree, nil
}

// remoteHeadBranch reads the default branch from `git remote show`
// output: the text after the last ":" of the first "HEAD branch:" line.
func remoteHeadBranch(info string) string {
	for line := range strings.SplitSeq(info, "\n") {
		if strings.Contains(line, "HEAD branch:") {
			return strings.TrimSpace(line[strings.LastIndex(line, ":")+1:])
		}
	}
	return ""
}

// excludePathspecs turns the archive excludes into git's exclude
// pathspecs, as upstream does, so git-delta drops what tar.gz drops: a
// directory-only pattern excludes only what is below a match, a bare name
// matches at any depth, a pattern with "/" is anchored at the root.
func excludePathspecs(excludes []string) []string {
	var specs []string
	for _, raw := range excludes {
		dirOnly := strings.HasSuffix(raw, "/")
		pat := strings.TrimRight(raw, "/")
		if pat == "" {
			continue
		}
		if !strings.Contains(pat, "/") {
			pat = "**/" + pat
		}
		if !dirOnly {
			specs = append(specs, ":(glob,exclude)"+pat)
		}
		specs = append(specs, ":(glob,exclude)"+pat+"/**")
	}
	return specs
}

// repoMetadata is upstream's get_git_repository_metadata: origin's URL
// with credentials redacted, HEAD's commit and the branch ("DETACHED" for
// a detached HEAD); each only when known.
func repoMetadata(ctx context.Context, root string, pure bool, ceiling string) map[string]string {
	meta := map[string]string{}
	var remote, head, branch string
	if pure {
		g, _, err := discoverRepo(root, ceiling)
		if err != nil {
			return meta
		}
		remote = g.remoteURL("origin")
		if sha, ok := g.resolveCommit("HEAD"); ok {
			head, branch = sha, g.abbrevHead()
		}
	} else {
		g := newGitCmd(root, ceiling)
		remote, _ = g.probe(ctx, "remote", "get-url", "origin")
		if out, err := g.probe(ctx, "rev-parse", "HEAD", "--abbrev-ref", "HEAD"); err == nil {
			if lines := strings.Split(out, "\n"); len(lines) == 2 {
				head, branch = lines[0], lines[1]
			}
		}
	}
	if remote != "" {
		meta["repo_remote"] = redactURLParams(redactURLCredentials(remote))
	}
	if head != "" {
		meta["head_commit"] = head
		if branch == "HEAD" {
			branch = "DETACHED"
		}
		meta["branch"] = branch
	}
	return meta
}
