package exportrun

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/canvasapp/companion/agentclient"
)

// The agent-server has no route that lists a directory's files (only its
// subdirectories: docs/agent-server-files.md), so the entries of a
// directory are listed with its bash route: listScript, a POSIX shell
// loop that runs in the directory (cwd) and prints one "TYPE NAME" record
// per entry, each ended by a NUL byte, then "end N" with the count, so
// that an answer upstream cut to its last chunk cannot pass for a whole
// listing. TYPE is d (directory), f (regular file), x (executable
// regular file), l (symbolic link) or o (anything else). Names are
// printed as they are: upstream decodes output as UTF-8 with
// replacement, so a name that is not valid UTF-8 comes back with U+FFFD
// and is refused rather than guessed.
const listScript = `n=0
for e in * .[!.]* ..?*; do
  if [ -L "$e" ]; then t=l
  elif [ -d "$e" ]; then t=d
  elif [ -f "$e" ] && [ -x "$e" ]; then t=x
  elif [ -f "$e" ]; then t=f
  elif [ -e "$e" ]; then t=o
  else continue
  fi
  printf '%s %s\0' "$t" "$e"
  n=$((n+1))
done
printf 'end %s\0' "$n"`

// listTimeout bounds the listing command, in the bash route's seconds.
const listTimeout = 120

// entry is one entry of a listed directory.
type entry struct {
	name string
	typ  byte // d, f, x, l or o
}

// list lists dir's entries through the bash route.
func list(ctx context.Context, cl *agentclient.Client, dir string) ([]entry, error) {
	res, err := cl.ExecuteBash(ctx, listScript, dir, listTimeout)
	if err != nil {
		return nil, err
	}
	if *res.ExitCode != 0 {
		msg := ""
		if res.Stderr != nil {
			msg = strings.TrimSpace(*res.Stderr)
		}
		if len(msg) > 300 {
			msg = msg[:300] + "…"
		}
		return nil, fmt.Errorf("the listing command exited %d: %s", *res.ExitCode, msg)
	}
	out := ""
	if res.Stdout != nil {
		out = *res.Stdout
	}
	return parseListing(out)
}

// parseListing reads listScript's output.
func parseListing(out string) ([]entry, error) {
	recs := strings.Split(out, "\x00")
	if len(recs) < 2 || recs[len(recs)-1] != "" {
		return nil, fmt.Errorf("the listing is cut short: it does not end with its count")
	}
	recs = recs[:len(recs)-1]
	last := recs[len(recs)-1]
	n, err := strconv.Atoi(strings.TrimPrefix(last, "end "))
	if !strings.HasPrefix(last, "end ") || err != nil {
		return nil, fmt.Errorf("the listing is cut short: it does not end with its count")
	}
	recs = recs[:len(recs)-1]
	if len(recs) != n {
		return nil, fmt.Errorf("the listing holds %d entries but counts %d: the agent-server answered only part of it", len(recs), n)
	}
	list := make([]entry, 0, n)
	for _, r := range recs {
		t, name, ok := strings.Cut(r, " ")
		if !ok || len(t) != 1 || !strings.Contains("dfxlo", t) || name == "" || strings.Contains(name, "/") {
			return nil, fmt.Errorf("the listing has a record it cannot read: %q", r)
		}
		if strings.ContainsRune(name, utf8.RuneError) {
			return nil, fmt.Errorf("the name %q is not valid UTF-8 as the agent-server reports it, so it cannot be read by name", name)
		}
		list = append(list, entry{name: name, typ: t[0]})
	}
	return list, nil
}
