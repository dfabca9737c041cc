package core

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// OpRestore journals a restore: a new workspace, in state creating, whose
// box is made from an export's snapshot (RestoreRecord says which).
const OpRestore OpKind = "restore"

// AuditRestore is the audit action of a restore.
const AuditRestore = "restore"

// restoreBudget bounds one restore, every attempt included: uploading a
// large snapshot takes longer than a create.
const restoreBudget = 30 * time.Minute

// RestoreRequest is what POST /v1/exports/{id}/restore asks for.
type RestoreRequest struct {
	// Name of the new workspace; empty: the exported workspace's name
	// with " (restored)".
	Name string
	// AccountID is the account whose provider makes the new box; empty:
	// the exported workspace's account, else the owner's only account
	// that can restore.
	AccountID string
}

// RestoreRecord ties a restored workspace to its export, so an
// interrupted restore can run again after a restart.
type RestoreRecord struct {
	WorkspaceID string
	ExportID    string
	CreatedAt   time.Time
}

// RestoreStore keeps restore records. db implements it.
type RestoreStore interface {
	PutRestore(ctx context.Context, r RestoreRecord) error
	// GetRestore returns the record of a workspace; none: KindNotFound.
	GetRestore(ctx context.Context, workspaceID string) (RestoreRecord, error)
}

func (s *Service) restoreStore() RestoreStore {
	rs, _ := s.cfg.Store.(RestoreStore)
	return rs
}

// exportSHA256 is the hash an audit entry names for an export: its full
// archive's, else its manifest's (which lists every file's).
func exportSHA256(e ExportRecord) string {
	if e.ArchiveSHA256 != "" {
		return e.ArchiveSHA256
	}
	for _, f := range e.Files {
		if f.Name == "manifest.json" {
			return f.SHA256
		}
	}
	return ""
}

// RestoreExport brings a verified, restorable export of owner back as a
// new workspace with a new box and a new agent-server key. Before anything
// is made, every snapshot file is re-hashed against the export's record
// (a mismatch is KindConflict and creates nothing) and the adapter checks
// it can restore (its image is at hand). The box is then made in the
// background by a journaled action, like a create; the workspace shows
// its progress.
func (s *Service) RestoreExport(ctx context.Context, owner, exportID string, req RestoreRequest) (Workspace, error) {
	rs := s.restoreStore()
	if rs == nil || s.exportStore() == nil {
		return Workspace{}, Errorf(KindUnavailable, "restores are not configured in this companion")
	}
	rec, err := s.Export(ctx, owner, exportID)
	if err != nil {
		return Workspace{}, err
	}
	if !rec.Verified {
		return Workspace{}, &Error{Kind: KindConflict, Message: fmt.Sprintf("export %s is %s, not verified: only a verified export can be restored", rec.ID, rec.State)}
	}
	if !rec.Restorable() {
		return Workspace{}, Errorf(KindInvalid, "export %s holds no box snapshot (only exports of Docker workspaces do), so it cannot be restored; its files can still be downloaded", rec.ID)
	}
	var orig Workspace
	if w, err := s.cfg.Store.GetWorkspace(ctx, rec.WorkspaceID); err == nil && w.Owner == owner {
		orig = w
	}
	name := strings.TrimSpace(req.Name)
	if name == "" {
		name = orig.Name
		if name == "" {
			name = rec.WorkspaceID
		}
		name += " (restored)"
		if r := []rune(name); len(r) > MaxNameRunes {
			name = string(r[len(r)-MaxNameRunes:])
		}
	}
	if err := validateName(name); err != nil {
		return Workspace{}, err
	}
	acct, err := s.restoreAccount(ctx, owner, orig, req.AccountID)
	if err != nil {
		return Workspace{}, err
	}
	p, _, err := s.provider(ctx, acct)
	if err != nil {
		return Workspace{}, err
	}
	sn, ok := p.(Snapshotter)
	if !ok {
		return Workspace{}, Errorf(KindInvalid, "provider %s of account %s cannot restore a box snapshot; choose a docker account (account_id)", acct.Provider, acct.ID)
	}
	src := newExportSource(rec)
	if err := src.verifyAll(); err != nil {
		return Workspace{}, err
	}
	if err := sn.CheckRestore(ctx, acct, src); err != nil {
		return Workspace{}, err
	}
	now := s.now()
	ws := Workspace{ID: NewID("ws"), Owner: owner, Name: name, AccountID: acct.ID, Provider: acct.Provider,
		State: StateCreating, CreatedAt: now}
	unlock, _ := s.locks.tryLock(ws.ID) // a fresh id: always free
	release := true
	defer func() {
		if release {
			unlock()
		}
	}()
	if err := rs.PutRestore(ctx, RestoreRecord{WorkspaceID: ws.ID, ExportID: rec.ID, CreatedAt: now}); err != nil {
		return Workspace{}, err
	}
	op, err := s.cfg.Store.PutOp(ctx, Op{WorkspaceID: ws.ID, Kind: OpRestore, Step: "requested", CreatedAt: now, UpdatedAt: now})
	if err != nil {
		return Workspace{}, err
	}
	if ws, err = s.feed.Save(ctx, ws); err != nil {
		s.dropOp(op)
		return Workspace{}, err
	}
	actor := ActorOf(ctx, ActorRecovery)
	s.rememberActor(op.ID, actor)
	s.audit(ctx, AuditEntry{Owner: owner, Actor: actor, Action: AuditRestore, WorkspaceID: ws.ID, AccountID: acct.ID,
		Provider: acct.Provider, Outcome: "started", ExportSHA256: exportSHA256(rec)})
	s.log.Info("workspace restore started", "workspace", ws.ID, "export", rec.ID, "provider", acct.Provider)
	release = false
	s.goOp(op, unlock, func(ctx context.Context) { s.runOp(ctx, op, ws, acct) })
	return ws, nil
}

// restoreAccount picks the account a restore uses.
func (s *Service) restoreAccount(ctx context.Context, owner string, orig Workspace, id string) (Account, error) {
	if id != "" {
		return s.Account(ctx, owner, id)
	}
	if orig.AccountID != "" {
		if a, err := s.Account(ctx, owner, orig.AccountID); err == nil {
			return a, nil
		}
	}
	accts, err := s.Accounts(ctx, owner)
	if err != nil {
		return Account{}, err
	}
	var can []Account
	for _, a := range accts {
		if p, _, err := s.provider(ctx, a); err == nil {
			if _, ok := p.(Snapshotter); ok {
				can = append(can, a)
			}
		}
	}
	switch len(can) {
	case 1:
		return can[0], nil
	case 0:
		return Account{}, Errorf(KindInvalid, "no account of yours can restore a box snapshot: add a docker account, then restore again")
	}
	return Account{}, Errorf(KindInvalid, "%d of your accounts can restore this export: say which one with account_id", len(can))
}

// runRestore is the journaled part of a restore; run again after a crash
// it finds the box of an earlier attempt (the adapter resumes or redoes
// it), so it never makes two.
func (s *Service) runRestore(ctx context.Context, op Op, ws Workspace, acct Account, p Provider, info ProviderInfo) {
	var rec ExportRecord
	fail := func(box Box, err error) {
		if box.ID != "" {
			ws.BoxID, ws.BoxURL = box.ID, box.URL // so that delete finds it
		}
		ws.State, ws.Error = StateError, "restore failed: "+messageOf(err)
		s.finishRestore(ctx, op, ws, rec, err)
	}
	rr, err := s.restoreStore().GetRestore(ctx, ws.ID)
	if err == nil {
		rec, err = s.exportStore().GetExport(ctx, rr.ExportID)
	}
	if err != nil {
		fail(Box{}, fmt.Errorf("read what to restore: %w", err))
		return
	}
	sn, ok := p.(Snapshotter)
	if !ok {
		fail(Box{}, Errorf(KindInvalid, "provider %s cannot restore a box snapshot", info.Name))
		return
	}
	key, err := s.agentKey(ctx, ws.ID)
	if err != nil {
		fail(Box{}, err)
		return
	}
	prog := s.newProgress(ctx, ws)
	var box Box
	b := budget{provider: acct.Provider, limit: max(s.cfg.ActionBudget, restoreBudget), own: true}
	err = s.retry(ctx, &op, b, "provider_restore", func(ctx context.Context) error {
		bx, err := sn.Restore(ctx, acct, RestoreSpec{WorkspaceID: ws.ID, Name: ws.Name, AgentKey: key, Progress: prog.report}, newExportSource(rec))
		box = bx
		return err
	})
	prog.stop()
	if err == nil {
		box, err = s.startFoundBox(ctx, &op, box, acct, p, info)
	}
	if err != nil {
		fail(box, err)
		return
	}
	ws = s.applyBox(ws, box)
	ws.Error, ws.Progress = "", ""
	s.finishRestore(ctx, op, ws, rec, nil)
}

// finishRestore is finish with the export's SHA-256 in the audit entry.
func (s *Service) finishRestore(ctx context.Context, op Op, ws Workspace, rec ExportRecord, cause error) {
	if ctx.Err() != nil {
		s.log.Info("restore interrupted; it resumes at next start", "workspace", ws.ID, "step", op.Step)
		return
	}
	sctx := context.WithoutCancel(ctx)
	ws.Progress = ""
	if _, err := s.feed.Save(sctx, ws); err != nil {
		s.log.Error("could not record the restore's outcome; it resumes at next start", "workspace", ws.ID, "err", err)
		return
	}
	s.dropOp(op)
	s.audit(sctx, AuditEntry{Owner: ws.Owner, Actor: s.takeActor(op.ID), Action: AuditRestore, WorkspaceID: ws.ID,
		AccountID: ws.AccountID, Provider: ws.Provider, Outcome: outcomeOf(cause), ExportSHA256: exportSHA256(rec)})
	if cause != nil {
		s.log.Warn("workspace restore failed", "workspace", ws.ID, "export", rec.ID, "err", messageOf(cause), "kind", KindOf(cause))
		return
	}
	s.log.Info("workspace restore done", "workspace", ws.ID, "export", rec.ID, "box", ws.BoxID)
}

// exportSource is a SnapshotSource over a verified export's directory.
type exportSource struct {
	rec   ExportRecord
	files map[string]ExportFile
}

func newExportSource(rec ExportRecord) *exportSource {
	src := &exportSource{rec: rec, files: map[string]ExportFile{}}
	for _, f := range rec.Files {
		if f.Kind == ExportKindSnapshot {
			src.files[f.Name] = f
		}
	}
	return src
}

func (x *exportSource) Files() []ExportFile {
	out := make([]ExportFile, 0, len(x.files))
	for _, f := range x.rec.Files {
		if f.Kind == ExportKindSnapshot {
			out = append(out, f)
		}
	}
	return out
}

// Open opens a snapshot file of the export; the reader re-hashes it and
// fails at its end if it is not what the export recorded.
func (x *exportSource) Open(name string) (io.ReadCloser, error) {
	f, ok := x.files[name]
	if !ok {
		return nil, &Error{Kind: KindConflict, Message: fmt.Sprintf("export %s has no snapshot file %q: the export is incomplete and cannot be restored", x.rec.ID, name)}
	}
	fh, err := os.Open(filepath.Join(x.rec.Dir, f.Name))
	if err != nil {
		return nil, &Error{Kind: KindConflict, Message: fmt.Sprintf("file %s of export %s cannot be read (%v): the export is damaged or was moved, so it cannot be restored", name, x.rec.ID, err), Err: err}
	}
	return &checkedReader{f: fh, h: sha256.New(), want: f, exportID: x.rec.ID}, nil
}

// verifyAll re-hashes every snapshot file.
func (x *exportSource) verifyAll() error {
	buf := make([]byte, 1<<20)
	for _, f := range x.Files() {
		r, err := x.Open(f.Name)
		if err != nil {
			return err
		}
		_, err = io.CopyBuffer(io.Discard, r, buf)
		r.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// checkedReader hashes a file as it is read and, at its end, fails with a
// KindConflict error if size or SHA-256 differ from the export's record.
type checkedReader struct {
	f        *os.File
	h        hash.Hash
	n        int64
	want     ExportFile
	exportID string
	err      error
}

func (c *checkedReader) Read(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n, err := c.f.Read(p)
	c.h.Write(p[:n])
	c.n += int64(n)
	if c.n > c.want.Bytes {
		c.err = c.mismatch()
		return n, c.err
	}
	if errors.Is(err, io.EOF) {
		if got := hex.EncodeToString(c.h.Sum(nil)); c.n != c.want.Bytes || got != c.want.SHA256 {
			c.err = c.mismatch()
			return n, c.err
		}
	} else if err != nil {
		c.err = fmt.Errorf("read file %s of export %s: %w", c.want.Name, c.exportID, err)
		return n, c.err
	}
	return n, err
}

func (c *checkedReader) mismatch() error {
	return &Error{Kind: KindConflict, Message: fmt.Sprintf(
		"file %s of export %s no longer matches the SHA-256 recorded when it was verified: the export is damaged, so it is not restored from",
		c.want.Name, c.exportID)}
}

// Err is the error the reader failed with, if any.
func (c *checkedReader) Err() error { return c.err }

func (c *checkedReader) Close() error { return c.f.Close() }
