package core

import (
	"context"
	"io"
)

// ExportKindSnapshot is the Kind of an export file that an adapter's
// Snapshotter wrote: a box's own filesystem and volumes, captured through
// the provider rather than through the agent-server. An export holding
// such files can be restored as a new workspace.
const ExportKindSnapshot = "snapshot"

// SnapshotSink receives the files of one snapshot as they stream. Each
// file is hashed, made durable and read back like every other export file;
// an error means the snapshot, and so the export, failed.
type SnapshotSink interface {
	// Add streams r into the export as name (a safe file name, unique in
	// the export); format says what it is ("tar", "json").
	Add(name, format string, r io.Reader) error
}

// SnapshotSource reads back the snapshot files of a verified export. Every
// Open re-hashes what it hands out: a reader whose bytes do not match the
// export's record fails at its end (and a file that was already found
// changed is refused at Open), so an adapter must treat a read error as
// "do not use what you read".
type SnapshotSource interface {
	Open(name string) (io.ReadCloser, error)
	// Files lists the snapshot files of the export with their sizes.
	Files() []ExportFile
}

// RestoreSpec is the new box a restore makes.
type RestoreSpec struct {
	// WorkspaceID is the new workspace's id, put on the box like
	// CreateSpec.WorkspaceID.
	WorkspaceID string
	Name        string
	// AgentKey is the new box's agent-server key (a secret, like
	// CreateSpec.AgentKey); never the one of the snapshotted box.
	AgentKey string
	// Progress, when not nil, takes a short line on what is happening.
	Progress func(line string)
}

// Snapshotter is implemented by adapters that can capture a box's own
// filesystem and volumes into an export and bring them back as a new box
// (the Docker adapter, through the Engine API). core knows nothing of how.
type Snapshotter interface {
	// Snapshot streams the box's snapshot files into sink. It must not
	// write a secret (the agent-server key) into any file.
	Snapshot(ctx context.Context, acct Account, boxID string, sink SnapshotSink) error
	// CheckRestore tells, before anything is made, whether src can be
	// restored here (its image is at hand, say); the error says why not.
	CheckRestore(ctx context.Context, acct Account, src SnapshotSource) error
	// Restore makes a new box from src, labelled with spec.WorkspaceID,
	// and starts it once every file is in place. Restoring twice for one
	// workspace must not make two boxes: an adapter resumes or redoes the
	// earlier attempt's box.
	Restore(ctx context.Context, acct Account, spec RestoreSpec, src SnapshotSource) (Box, error)
}
