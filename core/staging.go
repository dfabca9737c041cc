package core

import (
	"context"
	"fmt"
)

// stagingSweepPasses is how many journal recovery passes (one every half
// lease TTL) go between two sweeps of the shared export dir's staging
// files: every 5 minutes at the default --lease-ttl of 30s. A sweep reads
// every workspace's export directory, so it is not run on every pass.
const stagingSweepPasses = 20

// StagingSwept is what one SweepStaging removed.
type StagingSwept struct {
	Removed int
	Bytes   int64
	// Unmarked counts staging directories left alone because their name
	// carries no export record (an older companion wrote them).
	Unmarked int
}

// SweepStaging removes the staging files of workspaceID's exports (of
// every workspace when it is empty) that nobody can still be writing: those
// whose export record is failed, verified or missing. A record is written,
// running, before its exporter creates any file (StartExport and the
// delete pipeline's export step both write it first), and it leaves the
// running state only when the export has ended (the replica running it
// records the outcome after Commit renamed its staging directory or Abort
// removed it) or when the replica taking over a dead one's journal entry
// fails it (failDeadExports). So a staging directory whose record is not
// running belongs to no live export, and one whose record is running is
// never touched. Each removal is logged with its size.
func (s *Service) SweepStaging(ctx context.Context, workspaceID string) (StagingSwept, error) {
	var out StagingSwept
	sw, ok := s.cfg.Exporter.(StagingSweeper)
	store := s.exportStore()
	if !ok || store == nil {
		return out, nil
	}
	list, err := sw.Staging(ctx, workspaceID)
	for _, f := range list {
		if f.ExportID == "" {
			out.Unmarked++
			continue
		}
		state := "missing"
		rec, gerr := store.GetExport(ctx, f.ExportID)
		switch {
		case IsKind(gerr, KindNotFound):
		case gerr != nil:
			s.log.Warn("could not read the record of an export's staging files; left for the next sweep",
				"workspace", f.WorkspaceID, "export", f.ExportID, "err", gerr)
			continue
		case rec.State == ExportRunning:
			continue // its writer may be alive: never touched
		default:
			state = string(rec.State)
		}
		n, rerr := sw.RemoveStaging(ctx, f)
		if rerr != nil {
			s.log.Warn("could not remove the staging files of an export nobody writes", "workspace", f.WorkspaceID,
				"export", f.ExportID, "dir", f.Dir, "err", rerr)
			continue
		}
		out.Removed++
		out.Bytes += n
		s.log.Info("removed the staging files of an export nobody writes", "workspace", f.WorkspaceID,
			"export", f.ExportID, "record", state, "bytes", n, "dir", f.Dir)
	}
	if err != nil {
		return out, fmt.Errorf("list export staging files: %w", err)
	}
	return out, nil
}

// sweepStagingLogged is SweepStaging for the background: failures are
// logged, not returned.
func (s *Service) sweepStagingLogged(ctx context.Context, workspaceID string) StagingSwept {
	res, err := s.SweepStaging(ctx, workspaceID)
	if err != nil && ctx.Err() == nil {
		s.log.Warn("sweep of export staging files failed; the next one retries", "workspace", workspaceID, "err", err)
	}
	if res.Removed > 0 && workspaceID == "" {
		s.log.Info("swept export staging files", "removed", res.Removed, "bytes", res.Bytes)
	}
	return res
}
