package exports

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
)

const (
	// nbuf buffers of copyBuf bytes circulate between the copy and the
	// stream hasher: memory stays at a few MiB whatever the file's size.
	nbuf = 4
	// syncEvery is how much is written between fsyncs; each synced prefix
	// is read back while the rest still streams.
	syncEvery = 32 << 20
)

// writeFile streams r into the export as name and returns the size and hex
// SHA-256 of what it read from r. Four things run at once, so a large
// archive costs about one pass, not three:
//   - the copy: read r, write the temp file;
//   - the syncer: fsync in the background every syncEvery bytes;
//   - the stream hasher: SHA-256 of the bytes as read from r;
//   - the read-back: a second descriptor reads each fsynced prefix from the
//     filesystem and hashes it.
//
// Once all is written and fsynced, both hashes and sizes must agree;
// then the file is renamed to name and the directory fsynced. Reading a
// prefix back after its fsync is the same check as reading the whole file
// after the rename: a rename moves a name, not data.
func (e *Export) writeFile(name string, r io.Reader) (int64, string, error) {
	tmp, err := os.CreateTemp(e.staging, "."+name+".tmp-*")
	if err != nil {
		return 0, "", classify(fmt.Errorf("export %s: create temp file: %w", name, err))
	}
	ok := false
	defer func() {
		if !ok {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()

	// Stream hasher.
	sh := sha256.New()
	full := make(chan []byte, nbuf)
	free := make(chan []byte, nbuf)
	for range nbuf {
		free <- make([]byte, copyBuf)
	}
	var hashers sync.WaitGroup
	hashers.Go(func() {
		for b := range full {
			sh.Write(b)
			free <- b[:cap(b)]
		}
	})
	// Read-back.
	rb := &readBack{open: e.w.openRead, path: tmp.Name(), kick: make(chan struct{}, 1), h: sha256.New()}
	hashers.Go(rb.run)
	// Syncer: fsyncs in the background so the copy never waits on the
	// disk; each fsync makes durable at least what was written when it
	// began, and that stretch is handed to the read-back.
	syncReq := make(chan int64, 1)
	var syncErr error
	var syncer sync.WaitGroup
	syncer.Go(func() {
		for off := range syncReq {
			if syncErr != nil {
				continue
			}
			if err := tmp.Sync(); err != nil {
				syncErr = err
				continue
			}
			rb.durable(off)
		}
	})
	stopSync := sync.OnceFunc(func() {
		close(syncReq)
		syncer.Wait()
	})
	stop := func() {
		stopSync()
		close(full)
		rb.finish()
		hashers.Wait()
	}

	var dst io.Writer = tmp
	if e.w.wrapFile != nil {
		dst = e.w.wrapFile(dst)
	}
	var n, synced int64
	for {
		buf := <-free
		k, rerr := io.ReadFull(r, buf)
		if k > 0 {
			if _, err := dst.Write(buf[:k]); err != nil {
				stop()
				return 0, "", classify(fmt.Errorf("export %s: after %d bytes: %w", name, n, err))
			}
			n += int64(k)
			full <- buf[:k]
		} else {
			free <- buf
		}
		if rerr == io.EOF || rerr == io.ErrUnexpectedEOF {
			break
		}
		if rerr != nil {
			stop()
			return 0, "", fmt.Errorf("export %s: reading the source after %d bytes: %w", name, n, rerr)
		}
		if n-synced >= syncEvery {
			select {
			case syncReq <- n:
				synced = n
			default: // the last fsync is still running; ask again later
			}
		}
	}
	stopSync()
	if syncErr == nil {
		syncErr = tmp.Sync()
	}
	if syncErr != nil {
		stop()
		return 0, "", classify(fmt.Errorf("export %s: fsync: %w", name, syncErr))
	}
	rb.durable(n)
	stop()
	if rb.err != nil {
		return 0, "", classify(fmt.Errorf("export %s: read back: %w", name, rb.err))
	}
	sum := hex.EncodeToString(sh.Sum(nil))
	if got := hex.EncodeToString(rb.h.Sum(nil)); rb.n != n || got != sum {
		return 0, "", fmt.Errorf("export %s: %w: streamed %d bytes sha256 %s, read back %d bytes sha256 %s",
			name, ErrMismatch, n, sum, rb.n, got)
	}
	if err := tmp.Close(); err != nil {
		return 0, "", classify(fmt.Errorf("export %s: close: %w", name, err))
	}
	if err := os.Rename(tmp.Name(), filepath.Join(e.staging, name)); err != nil {
		return 0, "", classify(fmt.Errorf("export %s: rename: %w", name, err))
	}
	ok = true
	if err := syncDir(e.staging); err != nil {
		return 0, "", classify(fmt.Errorf("export %s: fsync directory: %w", name, err))
	}
	return n, sum, nil
}

// readBack hashes a file's durable prefix as it grows, through its own
// descriptor.
type readBack struct {
	open func(string) (io.ReadCloser, error)
	path string
	kick chan struct{}

	upTo  atomic.Int64 // bytes fsynced so far
	done  atomic.Bool  // no more will come
	h     hash.Hash
	n     int64 // bytes read back
	short bool  // the file ended early: n tells the caller it differs
	err   error
}

func (rb *readBack) durable(n int64) {
	rb.upTo.Store(n)
	select {
	case rb.kick <- struct{}{}:
	default:
	}
}

func (rb *readBack) finish() {
	rb.done.Store(true)
	select {
	case rb.kick <- struct{}{}:
	default:
	}
}

func (rb *readBack) run() {
	var rd io.ReadCloser
	buf := make([]byte, copyBuf)
	defer func() {
		if rd != nil {
			rd.Close()
		}
	}()
	for range rb.kick {
		// done is read before upTo: a final durable() comes before finish().
		last := rb.done.Load()
		target := rb.upTo.Load()
		if target > rb.n && rb.err == nil && !rb.short {
			if rd == nil {
				open := rb.open
				if open == nil {
					open = func(p string) (io.ReadCloser, error) { return os.Open(p) }
				}
				rd, rb.err = open(rb.path)
			}
			if rb.err == nil {
				k, err := io.CopyBuffer(rb.h, io.LimitReader(struct{ io.Reader }{rd}, target-rb.n), buf)
				rb.n += k
				if err != nil {
					rb.err = err
				} else if rb.n < target {
					rb.short = true
				}
			}
		}
		if last {
			return
		}
	}
}
