package api

import (
	"sort"
	"strings"
	"time"

	"github.com/canvasapp/companion/providers/wasm/sdk"
)

// LabelName carries the workspace's human name on providers whose box name
// companion sets to something else (or cannot set).
const LabelName = "companion.name"

// Host limits on a box's labels (ABI.md "Box").
const (
	maxLabels     = 64
	maxLabelBytes = 4096
)

// Labels returns the provider's labels (tags, metadata) in a form the
// host accepts: at most 64, each key plus value at most 4096 bytes. When
// there are too many, companion's own (companion.*) are kept first, then
// the rest in key order, so the workspace label is never the one dropped.
func Labels(in map[string]string) map[string]string {
	if len(in) == 0 {
		return nil
	}
	keys := make([]string, 0, len(in))
	for k, v := range in {
		if k != "" && len(k)+len(v) <= maxLabelBytes {
			keys = append(keys, k)
		}
	}
	if len(keys) > maxLabels {
		sort.Slice(keys, func(i, j int) bool {
			oi, oj := strings.HasPrefix(keys[i], "companion."), strings.HasPrefix(keys[j], "companion.")
			if oi != oj {
				return oi
			}
			return keys[i] < keys[j]
		})
		keys = keys[:maxLabels]
	}
	out := make(map[string]string, len(keys))
	for _, k := range keys {
		out[k] = in[k]
	}
	return out
}

// CreateLabels is what a module stores on a new box: spec.Labels (which
// hold the workspace id) plus the workspace's name.
func CreateLabels(spec sdk.CreateSpec) map[string]string {
	out := make(map[string]string, len(spec.Labels)+2)
	for k, v := range spec.Labels {
		out[k] = v
	}
	if spec.WorkspaceID != "" {
		out[sdk.LabelWorkspace] = spec.WorkspaceID
	}
	if spec.Name != "" {
		out[LabelName] = spec.Name
	}
	return out
}

// CeilMinutes converts a duration to whole minutes, rounding up, so that
// a provider counting minutes never acts earlier than asked.
func CeilMinutes(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Minute - 1) / time.Minute)
}

// CeilSeconds converts a duration to whole seconds, rounding up.
func CeilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Second - 1) / time.Second)
}
