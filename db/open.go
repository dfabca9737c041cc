package db

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/canvasapp/companion/core"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

var _ core.Store = (*Store)(nil)

// Errors Open returns, wrapped with a message that names the file and says
// what to do. Test for them with errors.Is.
var (
	// ErrNotDatabase: the file is not a SQLite database, is damaged, or
	// belongs to another application.
	ErrNotDatabase = errors.New("not a companion database")
	// ErrSchemaTooNew: the file was written by a newer build of companion.
	ErrSchemaTooNew = errors.New("database schema is newer than this build")
)

// busyTimeout is how long a statement waits for a lock held by another
// process (another companion pointed at the same data dir, a sqlite3 shell)
// before failing. Within one process writers never wait on SQLite's lock:
// they queue for the single write connection.
const busyTimeout = 5 * time.Second

// readConns bounds the read pool. Reads are short; a few connections are
// enough to keep list, feed catch-up and lookups from queueing behind each
// other on a small machine.
const readConns = 4

// cacheKiB is each connection's page cache (SQLite's default is 2 MiB).
const cacheKiB = 8 << 10

// walSizeLimit is PRAGMA journal_size_limit, in bytes.
const walSizeLimit = 64 << 20

// Store is companion's SQLite store. It implements core.Store and is safe
// for concurrent use; Close it when done.
type Store struct {
	path     string
	w        *sql.DB // exactly one connection; every write goes here
	r        *sql.DB // read-only pool
	instance string
	now      func() time.Time

	// The write statements are prepared at the first write, and the read
	// pool is opened in the background once something asks for it
	// (WarmReads, a read transaction, the list of all workspaces): each
	// SQLite connection parses the whole schema when it opens (most of a
	// millisecond of CPU), and Open's callers (companion's start-up) should
	// not wait, or share a CPU, for what they do not use yet. Until the
	// read pool is warm, reads run on the write connection, unprepared.
	wsMu     sync.Mutex
	ws       atomic.Pointer[stmts] // prepared statements of w, after the first write
	warmOnce sync.Once             // starts warmReads, or (Close) marks it never to run
	warm     chan struct{}         // closed when rs is set
	rs       *stmts                // prepared statements of r (unprepared if closed before warming)
	wr       *stmts                // unprepared reads on w, until warm
}

// Open opens the store at path, creating the file (mode 0600) and its
// parent directory (mode 0700) if they are missing, and brings the schema
// up to date. A file that is not a SQLite database is refused with
// ErrNotDatabase; a file written by a newer companion with ErrSchemaTooNew.
// Neither is modified.
func Open(ctx context.Context, path string) (*Store, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("db: resolve path %q: %w", path, err)
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o700); err != nil {
		return nil, fmt.Errorf("db: create directory for %s: %w", abs, err)
	}
	if err := prepareFile(abs); err != nil {
		return nil, err
	}

	w, err := sql.Open("sqlite", dsn(abs, false))
	if err != nil {
		return nil, fmt.Errorf("db: open %s: %w", abs, err)
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxIdleTime(0)
	w.SetConnMaxLifetime(0)

	s := &Store{path: abs, w: w, now: time.Now}
	if err := s.setup(ctx); err != nil {
		w.Close()
		return nil, err
	}
	// sql.Open only parses the DSN; no connection is made here.
	r, err := sql.Open("sqlite", dsn(abs, true))
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("db: open %s: %w", abs, err)
	}
	r.SetMaxOpenConns(readConns)
	r.SetMaxIdleConns(readConns)
	s.r = r
	s.wr = &stmts{db: w}
	s.warm = make(chan struct{})
	return s, nil
}

// WarmReads starts opening the read pool and preparing its statements in
// the background, if that has not started yet. Reads work before (on the
// write connection); a read transaction or the list of all workspaces
// starts the warm-up itself and waits for it. companion calls WarmReads
// right after its ready line, so the warm-up does not compete with start-up
// for a CPU.
func (s *Store) WarmReads() {
	s.warmOnce.Do(func() { go s.warmReads() })
}

// warmReads opens the read pool's first connection and prepares the hot
// reads on it. Should that fail, reads still use the pool, unprepared:
// the file opened and migrated on the write connection, so a read
// connection's error is better reported by the read that meets it.
func (s *Store) warmReads() {
	defer close(s.warm)
	rs, err := prepare(context.Background(), s.r, hotReads)
	if err != nil {
		rs = &stmts{db: s.r}
	}
	s.rs = rs
}

// reads returns the statements a read outside a transaction uses: the
// read pool's once it is warm, the write connection until then.
func (s *Store) reads() *stmts {
	select {
	case <-s.warm:
		return s.rs
	default:
		return s.wr
	}
}

// writes returns w's prepared statements, preparing them at the first
// call (again at the next, should preparing fail). It must be called with
// w's connection free, not inside write.
func (s *Store) writes() (*stmts, error) {
	if ws := s.ws.Load(); ws != nil {
		return ws, nil
	}
	s.wsMu.Lock()
	defer s.wsMu.Unlock()
	if ws := s.ws.Load(); ws != nil {
		return ws, nil
	}
	ws, err := prepare(context.Background(), s.w, hotWrites)
	if err != nil {
		return nil, fmt.Errorf("db: %s: %w", s.path, err)
	}
	s.ws.Store(ws)
	return ws, nil
}

// setup checks the file, migrates it and loads the instance id, all on the
// write connection.
func (s *Store) setup(ctx context.Context) error {
	// The first use opens the connection and runs the DSN's pragmas, which
	// is where a damaged file shows up.
	if err := s.w.PingContext(ctx); err != nil {
		return openErr(s.path, err)
	}
	version, err := checkSchema(ctx, s.w, s.path)
	if err != nil {
		return err
	}
	// WAL is a property of the file, so it is switched on here, once the
	// file is known to be companion's, rather than by every connection.
	// Switching writes the header page in the rollback journal's mode. For
	// a file without a page there is nothing a journal could restore, so
	// the switch goes without one: no journal file is created, synced,
	// and deleted (four file system operations, each about half a
	// millisecond on ext4, on a first start). The header page itself is
	// still synced before anything else is written.
	newFile := false
	if version == 0 {
		var pages int
		if err := s.w.QueryRowContext(ctx, `PRAGMA page_count`).Scan(&pages); err != nil {
			return openErr(s.path, err)
		}
		if newFile = pages == 0; newFile {
			if _, err := s.w.ExecContext(ctx, `PRAGMA journal_mode = OFF`); err != nil {
				return openErr(s.path, err)
			}
		}
	}
	var mode string
	if err := s.w.QueryRowContext(ctx, `PRAGMA journal_mode = WAL`).Scan(&mode); err != nil {
		return openErr(s.path, err)
	}
	if !strings.EqualFold(mode, "wal") {
		return fmt.Errorf("db: %s: SQLite cannot use WAL mode there (journal mode stays %q); put --data-dir on a local file system", s.path, mode)
	}
	if err := s.persistWAL(ctx); err != nil {
		return openErr(s.path, err)
	}
	if newFile {
		// The schema goes into a WAL file that did not exist. SQLite syncs
		// a WAL's header, and its directory, when it first writes it, so
		// that frames of an older WAL cannot pass for new ones after a
		// crash; a new file has no older frames, and losing it leaves the
		// header page written above: an empty database, made again at the
		// next start. So the first transaction skips those two syncs
		// (synchronous stays off for it alone); later commits sync as
		// usual (at checkpoints, as synchronous=NORMAL does in WAL mode).
		if _, err := s.w.ExecContext(ctx, `PRAGMA synchronous = OFF`); err != nil {
			return openErr(s.path, err)
		}
	}
	err = migrate(ctx, s.w, s.path, version)
	if newFile {
		if _, serr := s.w.ExecContext(ctx, `PRAGMA synchronous = NORMAL`); serr != nil && err == nil {
			err = openErr(s.path, serr)
		}
	}
	if err != nil {
		return err
	}
	// Read first: only a new file needs the write (and a random id).
	err = s.w.QueryRowContext(ctx, `SELECT value FROM meta WHERE key = 'instance_id'`).Scan(&s.instance)
	if err == nil {
		return nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return openErr(s.path, err)
	}
	id := core.NewID("inst")
	if _, err := s.w.ExecContext(ctx, `INSERT INTO meta (key, value) VALUES ('instance_id', ?) ON CONFLICT (key) DO NOTHING`, id); err != nil {
		return openErr(s.path, err)
	}
	if err := s.w.QueryRowContext(ctx, `SELECT value FROM meta WHERE key = 'instance_id'`).Scan(&s.instance); err != nil {
		return openErr(s.path, err)
	}
	return nil
}

// persistWAL keeps the -wal and -shm files when the write connection,
// the last to close, closes: SQLite still checkpoints the WAL into the
// main file and truncates it to zero bytes (journal_size_limit is set),
// but the next start opens both files instead of creating them again, two
// file creations of about half a millisecond each on ext4.
func (s *Store) persistWAL(ctx context.Context) error {
	c, err := s.w.Conn(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	return c.Raw(func(dc any) error {
		fc, ok := dc.(sqlite.FileControl)
		if !ok {
			return nil
		}
		_, err := fc.FileControlPersistWAL("main", 1)
		return err
	})
}

// openErr words a failure met while opening the file.
func openErr(path string, err error) error {
	if isCode(err, sqlite3.SQLITE_NOTADB) || isCode(err, sqlite3.SQLITE_CORRUPT) {
		return &openError{
			msg:   fmt.Sprintf("db: %s is not a SQLite database or is damaged (%v); move it away or point --data-dir elsewhere", path, err),
			kind:  ErrNotDatabase,
			cause: err,
		}
	}
	return fmt.Errorf("db: open %s: %w", path, err)
}

// sqliteHeader starts every SQLite database file.
var sqliteHeader = []byte("SQLite format 3\x00")

// CheckFile refuses, from its 100-byte header alone, a file Open would
// refuse: not a SQLite database, another application's, or written by a
// newer companion. A missing, empty or short file passes (Open decides).
// It costs one read and none of SQLite's start-up, so a caller can check
// before it announces itself; the header may trail changes still in the
// WAL after a crash, so Open checks again and its answer is final.
func CheckFile(path string) error {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("db: open %s: %w", path, err)
	}
	defer f.Close()
	head := make([]byte, headerSize)
	if n, err := readHead(f, path, head); err != nil || n < headerSize {
		return err
	}
	ms, err := migrations()
	if err != nil {
		return fmt.Errorf("db: embedded migrations: %w", err)
	}
	// The header is big-endian: user_version at offset 60, application_id
	// (signed) at 68.
	version := int(binary.BigEndian.Uint32(head[60:]))
	appID := int(int32(binary.BigEndian.Uint32(head[68:])))
	return checkIDs(path, version, appID, len(ms))
}

// headerSize is the length of a SQLite database file's header.
const headerSize = 100

// readHead reads up to len(head) bytes from the start of f, the file at
// path, and refuses one that is neither empty nor starts as SQLite's
// files do. It returns how many bytes it read.
func readHead(f io.Reader, path string, head []byte) (int, error) {
	n, err := io.ReadFull(f, head)
	switch {
	case n == 0 && errors.Is(err, io.EOF):
		return 0, nil // new or empty: SQLite initialises it
	case err != nil && !errors.Is(err, io.ErrUnexpectedEOF):
		return n, fmt.Errorf("db: read %s: %w", path, err)
	case n < len(sqliteHeader) || !bytes.Equal(head[:len(sqliteHeader)], sqliteHeader):
		return n, &openError{
			msg:  fmt.Sprintf("db: %s is not a SQLite database; move it away or point --data-dir elsewhere", path),
			kind: ErrNotDatabase,
		}
	}
	return n, nil
}

// prepareFile creates path with mode 0600 if it is missing (SQLite would
// create it world-readable under a usual umask; its -wal and -shm files
// copy the main file's mode) and refuses a file that is not empty and does
// not start with SQLite's header, before SQLite touches it.
func prepareFile(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("db: open %s: %w", path, err)
	}
	defer f.Close()
	_, err = readHead(f, path, make([]byte, len(sqliteHeader)))
	return err
}

// dsn is the modernc.org/sqlite connection string for path. Pragmas set
// here apply to every connection the pool opens; none of them changes the
// file, so opening a file that is then refused leaves it as it was.
func dsn(path string, readOnly bool) string {
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busyTimeout.Milliseconds()))
	q.Add("_pragma", "foreign_keys(1)")
	q.Add("_pragma", "synchronous(NORMAL)")
	// A page cache that holds 10,000 workspaces, so listing them does not
	// go back to the OS for every page.
	q.Add("_pragma", fmt.Sprintf("cache_size(%d)", -cacheKiB))
	// With the WAL kept across closes (persistWAL), a limit makes the last
	// close truncate it to zero bytes; while companion runs, a WAL larger
	// than this is truncated back to it after a checkpoint.
	q.Add("_pragma", fmt.Sprintf("journal_size_limit(%d)", walSizeLimit))
	if readOnly {
		q.Add("_pragma", "query_only(1)")
	} else {
		q.Set("_txlock", "immediate")
	}
	p := filepath.ToSlash(path)
	if !strings.HasPrefix(p, "/") {
		p = "/" + p // a Windows drive letter: file:///C:/...
	}
	u := url.URL{Scheme: "file", Path: p}
	return u.String() + "?" + q.Encode()
}

// Close closes the store. The last connection to close checkpoints the WAL
// into the main file.
func (s *Store) Close() error {
	var errs []error
	s.warmOnce.Do(func() { // never warmed, and it never will be: reads fail as closed
		s.rs = &stmts{db: s.r}
		close(s.warm)
	})
	<-s.warm // the read pool is not closed under warmReads
	s.rs.close()
	s.wsMu.Lock()
	if ws := s.ws.Load(); ws != nil {
		ws.close()
	}
	s.wsMu.Unlock()
	if s.r != nil {
		errs = append(errs, s.r.Close())
	}
	errs = append(errs, s.w.Close())
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("db: close %s: %w", s.path, err)
	}
	return nil
}

// Path is the absolute path of the database file.
func (s *Store) Path() string { return s.path }

// InstanceID returns the random id made when the database was created; it
// stays the same across reopens.
func (s *Store) InstanceID(ctx context.Context) (string, error) {
	return s.instance, nil
}

// write runs f in a write transaction (BEGIN IMMEDIATE on the write
// connection) and commits it. f must not use the store's other methods:
// the write connection is held until f returns.
func (s *Store) write(ctx context.Context, what string, f func(t txn) error) error {
	ws, err := s.writes()
	if err != nil {
		return wrap(what, err)
	}
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return wrap(what, err)
	}
	if err := f(txn{ctx, tx, ws}); err != nil {
		tx.Rollback()
		return wrap(what, err)
	}
	if err := tx.Commit(); err != nil {
		return wrap(what, err)
	}
	return nil
}

// read runs f in a read transaction, so every query in f sees the same
// snapshot.
func (s *Store) read(ctx context.Context, what string, f func(t txn) error) error {
	s.WarmReads()
	<-s.warm
	tx, err := s.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return wrap(what, err)
	}
	defer tx.Rollback()
	if err := f(txn{ctx, tx, s.rs}); err != nil {
		return wrap(what, err)
	}
	return nil
}

// wrap adds context to err. A *core.Error passes through unchanged; a
// SQLite failure a person can act on (disk full, file locked by another
// process) becomes a KindUnavailable core.Error.
func wrap(what string, err error) error {
	var ce *core.Error
	if errors.As(err, &ce) {
		return err
	}
	switch {
	case isCode(err, sqlite3.SQLITE_FULL):
		return &core.Error{Kind: core.KindUnavailable, Message: "companion's database could not be written: the disk is full", Err: fmt.Errorf("db: %s: %w", what, err)}
	case isCode(err, sqlite3.SQLITE_BUSY) || isCode(err, sqlite3.SQLITE_LOCKED):
		return &core.Error{Kind: core.KindUnavailable, Message: "companion's database is locked by another program; try again", Err: fmt.Errorf("db: %s: %w", what, err)}
	}
	return fmt.Errorf("db: %s: %w", what, err)
}

// isCode reports whether err is a SQLite error with primary result code
// code (extended codes carry the primary one in their low byte).
func isCode(err error, code int) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && se.Code()&0xff == code
}

// openError is a refusal to open a file, worded for a person.
type openError struct {
	msg   string
	kind  error
	cause error
}

func (e *openError) Error() string        { return e.msg }
func (e *openError) Is(target error) bool { return target == e.kind }
func (e *openError) Unwrap() error        { return e.cause }

// notFound is the error for an unknown id.
func notFound(what, id string) error {
	return core.Errorf(core.KindNotFound, "%s %q not found", what, id)
}
