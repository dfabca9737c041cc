package core

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
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
	// the exported workspace's account if it can restore the export, else
	// the owner's only account that can.
	AccountID string
	// Method is RestoreSnapshot or RestoreFiles; empty: the snapshot
	// when the account's adapter can restore it, else the files.
	Method string
}

// RestoreRecord ties a restored workspace to its export, so an
// interrupted restore can run again after a restart.
type RestoreRecord struct {
	WorkspaceID string
	ExportID    string
	CreatedAt   time.Time
	// Method is how it restores; "" (a record written before methods
	// existed) is RestoreSnapshot.
	Method string
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

// RestoreExport brings a verified export of owner back as a new
// workspace with a new box and a new agent-server key. Before anything is
// made, the files the restore reads are re-hashed against the export's
// record (a mismatch is KindConflict and creates nothing) and, for a
// snapshot, the adapter checks it can restore (its image is at hand). The
// box is then made in the background by a journaled action, like a
// create; the workspace shows its progress.
func (s *Service) RestoreExport(ctx context.Context, owner, exportID string, req RestoreRequest) (Workspace, error) {
	rec, acct, p, method, err := s.planRestore(ctx, owner, exportID, req)
	if err != nil {
		return Workspace{}, err
	}
	name := strings.TrimSpace(req.Name)
	if name == "" {
		name = rec.WorkspaceName
		if w, err := s.cfg.Store.GetWorkspace(ctx, rec.WorkspaceID); err == nil && w.Owner == owner && w.Name != "" {
			name = w.Name
		}
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
	src := s.newExportSource(ctx, rec)
	if err := src.verify(restoreReads(rec, method)); err != nil {
		return Workspace{}, err
	}
	if method == RestoreSnapshot {
		if err := p.(Snapshotter).CheckRestore(ctx, acct, src); err != nil {
			return Workspace{}, err
		}
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
	if err := s.restoreStore().PutRestore(ctx, RestoreRecord{WorkspaceID: ws.ID, ExportID: rec.ID, CreatedAt: now, Method: method}); err != nil {
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
		Provider: acct.Provider, Outcome: "started (" + method + ")", ExportSHA256: exportSHA256(rec)})
	s.log.Info("workspace restore started", "workspace", ws.ID, "export", rec.ID, "provider", acct.Provider, "method", method)
	release = false
	s.goOp(op, unlock, func(ctx context.Context) { s.runOp(ctx, op, ws, acct) })
	return ws, nil
}

// restoreReads are the export files a restore by method reads.
func restoreReads(rec ExportRecord, method string) []ExportFile {
	if method == RestoreSnapshot {
		return rec.snapshotFiles()
	}
	a, _ := rec.WorkspaceArchive()
	out := []ExportFile{a}
	if ix := rec.fileIndex(); ix != nil {
		out = append(out, *ix)
	}
	return out
}

// restoreAccount picks the account a restore uses and how it restores.
// An account named in req must be able to; without one, the exported
// workspace's account is taken when it can, else the owner's only
// account that can.
func (s *Service) restoreAccount(ctx context.Context, owner string, rec ExportRecord, orig Workspace, req RestoreRequest) (Account, Provider, string, error) {
	try := func(a Account) (Provider, string, string) {
		p, info, err := s.provider(ctx, a)
		if err != nil {
			return nil, "", messageOf(err)
		}
		m, why := s.restoreMethod(rec, p, info, req.Method)
		return p, m, why
	}
	if req.AccountID != "" {
		a, err := s.Account(ctx, owner, req.AccountID)
		if err != nil {
			return Account{}, nil, "", err
		}
		p, m, why := try(a)
		if m == "" {
			return Account{}, nil, "", Errorf(KindInvalid, "account %s cannot restore export %s: %s", a.ID, rec.ID, why)
		}
		return a, p, m, nil
	}
	for _, id := range []string{orig.AccountID, rec.AccountID} {
		if id == "" {
			continue
		}
		if a, err := s.Account(ctx, owner, id); err == nil {
			if p, m, _ := try(a); m != "" {
				return a, p, m, nil
			}
		}
	}
	accts, err := s.Accounts(ctx, owner)
	if err != nil {
		return Account{}, nil, "", err
	}
	type choice struct {
		a Account
		p Provider
		m string
	}
	var can []choice
	for _, a := range accts {
		if p, m, _ := try(a); m != "" {
			can = append(can, choice{a, p, m})
		}
	}
	switch len(can) {
	case 1:
		return can[0].a, can[0].p, can[0].m, nil
	case 0:
		return Account{}, nil, "", Errorf(KindInvalid, "no account of yours can restore export %s: add an account whose boxes run an agent-server (docker, daytona, …), then restore again", rec.ID)
	}
	return Account{}, nil, "", Errorf(KindInvalid, "%d of your accounts can restore export %s: say which one with account_id", len(can), rec.ID)
}

// runRestore is the journaled part of a restore; run again after a crash
// it finds the box of an earlier attempt (the adapter resumes or redoes
// it, or the files method finds it by its label and uploads again), so
// it never makes two.
func (s *Service) runRestore(ctx context.Context, op Op, ws Workspace, acct Account, p Provider, info ProviderInfo) {
	var rec ExportRecord
	fail := func(box Box, err error) {
		if box.ID != "" {
			ws.BoxID, ws.BoxURL = box.ID, box.URL // so that delete finds it
		}
		ws.State, ws.Error = StateError, "restore failed: "+messageOf(err)
		s.finishRestore(ctx, op, ws, rec, err, "")
	}
	rr, err := s.restoreStore().GetRestore(ctx, ws.ID)
	if err == nil {
		rec, err = s.exportStore().GetExport(ctx, rr.ExportID)
	}
	if err != nil {
		fail(Box{}, fmt.Errorf("read what to restore: %w", err))
		return
	}
	key, err := s.agentKey(ctx, ws.ID)
	if err != nil {
		fail(Box{}, err)
		return
	}
	prog := s.newProgress(ctx, ws)
	defer prog.stop()
	var box Box
	note := ""
	if rr.Method == RestoreFiles {
		box, note, err = s.restoreFiles(ctx, &op, ws, rec, acct, p, info, key, prog.report)
	} else {
		box, err = s.restoreSnapshot(ctx, &op, ws, rec, acct, p, info, key, prog.report)
	}
	prog.stop()
	if err != nil {
		fail(box, err)
		return
	}
	ws = s.applyBox(ws, box)
	ws.Error, ws.Progress = "", ""
	s.finishRestore(ctx, op, ws, rec, nil, note)
}

// restoreBudget is the budget of one restore step, every attempt
// included.
func (s *Service) restoreBudget(acct Account) budget {
	return budget{provider: acct.Provider, limit: max(s.cfg.ActionBudget, restoreBudget), own: true}
}

// restoreSnapshot makes the box from the export's snapshot.
func (s *Service) restoreSnapshot(ctx context.Context, op *Op, ws Workspace, rec ExportRecord, acct Account, p Provider, info ProviderInfo, key string, progress func(string)) (Box, error) {
	sn, ok := p.(Snapshotter)
	if !ok {
		return Box{}, Errorf(KindInvalid, "provider %s cannot restore a box snapshot", info.Name)
	}
	var box Box
	err := s.retry(ctx, op, s.restoreBudget(acct), "provider_restore", func(ctx context.Context) error {
		bx, err := sn.Restore(ctx, acct, RestoreSpec{WorkspaceID: ws.ID, Name: ws.Name, AgentKey: key, Progress: progress}, s.newExportSource(ctx, rec))
		box = bx
		return err
	})
	if err != nil {
		return box, err
	}
	return s.startFoundBox(ctx, op, box, acct, p, info)
}

// restoreFiles makes a fresh box like a create and puts the export's
// workspace files into it through its agent-server. note says what could
// not be put back as it was.
func (s *Service) restoreFiles(ctx context.Context, op *Op, ws Workspace, rec ExportRecord, acct Account, p Provider, info ProviderInfo, key string, progress func(string)) (Box, string, error) {
	archive, ok := rec.WorkspaceArchive()
	if !ok || s.cfg.Restorer == nil {
		return Box{}, "", Errorf(KindInvalid, "export %s cannot be restored file by file here", rec.ID)
	}
	progress("restore: making the box")
	box, err := s.createBox(ctx, op, acct, p, info, CreateSpec{WorkspaceID: ws.ID, Owner: ws.Owner, Name: ws.Name, AgentKey: key, Progress: progress})
	if err != nil {
		return box, "", err
	}
	// Recorded now, so that a restore that stops here still names its box.
	ws.BoxID, ws.BoxURL = box.ID, box.URL
	if saved, err := s.feed.Save(ctx, ws); err == nil {
		ws = saved
	}
	var ep BoxEndpoint
	err = s.retry(ctx, op, s.budgetFor(acct, p), "endpoint", func(ctx context.Context) error {
		var err error
		ep, err = s.boxEndpoint(ctx, ws, acct, p, info)
		return err
	})
	if err != nil {
		return box, "", fmt.Errorf("reach the new box's agent-server: %w", err)
	}
	job := FileRestoreJob{Endpoint: ep, Archive: archive, Index: rec.fileIndex(), Open: s.newExportSource(ctx, rec).Open,
		Root: archiveRoot(archive)}
	var res FileRestoreResult
	err = s.retry(ctx, op, s.restoreBudget(acct), "upload_files", func(ctx context.Context) error {
		var err error
		res, err = s.cfg.Restorer.RestoreFiles(ctx, job, progress)
		return err
	})
	if err != nil {
		return box, "", err
	}
	s.log.Info("restore: files put back", "workspace", ws.ID, "files", res.Files, "dirs", res.Dirs, "bytes", res.Bytes)
	if cur, err := s.reread(ctx, ws, acct, p); err == nil {
		box.State = cur.State
	}
	return box, strings.Join(res.Notes, "; "), nil
}

// finishRestore is finish with the export's SHA-256 in the audit entry.
func (s *Service) finishRestore(ctx context.Context, op Op, ws Workspace, rec ExportRecord, cause error, note string) {
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
		AccountID: ws.AccountID, Provider: ws.Provider, Outcome: withNote(outcomeOf(cause), note), ExportSHA256: exportSHA256(rec)})
	if cause != nil {
		s.log.Warn("workspace restore failed", "workspace", ws.ID, "export", rec.ID, "err", messageOf(cause), "kind", KindOf(cause))
		return
	}
	s.log.Info("workspace restore done", "workspace", ws.ID, "export", rec.ID, "box", ws.BoxID)
}

// exportSource reads the files of a verified export, each re-hashed as
// it is read (checkedReader). As a SnapshotSource it shows the snapshot
// files only.
type exportSource struct {
	rec   ExportRecord
	files map[string]ExportFile
	open  func(name string) (io.ReadSeekCloser, error)
}

func (s *Service) newExportSource(ctx context.Context, rec ExportRecord) *exportSource {
	src := &exportSource{rec: rec, files: map[string]ExportFile{},
		open: func(name string) (io.ReadSeekCloser, error) { return s.openExportFile(ctx, rec, name) }}
	for _, f := range rec.Files {
		src.files[f.Name] = f
	}
	return src
}

func (x *exportSource) Files() []ExportFile { return x.rec.snapshotFiles() }

// Open opens a file of the export; the reader re-hashes it and fails at
// its end if it is not what the export recorded.
func (x *exportSource) Open(name string) (io.ReadCloser, error) {
	f, ok := x.files[name]
	if !ok {
		return nil, &Error{Kind: KindConflict, Message: fmt.Sprintf("export %s has no file %q: the export is incomplete and cannot be restored", x.rec.ID, name)}
	}
	fh, err := x.open(f.Name)
	if err != nil {
		return nil, &Error{Kind: KindConflict, Message: fmt.Sprintf("file %s of export %s cannot be read (%v): the export is damaged or was moved, so it cannot be restored", name, x.rec.ID, err), Err: err}
	}
	return &checkedReader{f: fh, h: sha256.New(), want: f, exportID: x.rec.ID}, nil
}

// verify re-hashes files of the export.
func (x *exportSource) verify(files []ExportFile) error {
	buf := make([]byte, 1<<20)
	for _, f := range files {
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
	f        io.ReadCloser
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
