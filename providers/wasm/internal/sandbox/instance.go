package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"

	"github.com/canvasapp/companion/providers/wasm/internal/hostcall"
	"github.com/canvasapp/companion/providers/wasm/internal/wire"
)

// MaxResultBytes bounds what one op may return.
const MaxResultBytes = 16 << 20

// maxLogBytes bounds what a module's stdout or stderr keeps per call.
const maxLogBytes = 8 << 10

type instance struct {
	mod    api.Module
	mem    api.Memory
	abi    api.Function
	alloc  api.Function
	free   api.Function
	ops    map[string]api.Function // by op name
	stack  []uint64
	inPtr  uint32 // the input buffer the host holds (from companion_alloc)
	inCap  uint32
	stdout *logBuffer
	stderr *logBuffer
	calls  int
}

func (m *Module) instantiate(ctx context.Context) (*instance, error) {
	inst := &instance{
		stdout: &logBuffer{max: maxLogBytes},
		stderr: &logBuffer{max: maxLogBytes},
		ops:    map[string]api.Function{},
		stack:  make([]uint64, 2),
	}
	cfg := m.modCfg.WithStdout(inst.stdout).WithStderr(inst.stderr)
	mod, err := m.rt.InstantiateModule(experimental.WithMemoryAllocator(ctx, m.budget.alloc), m.cm, cfg)
	if err != nil {
		m.flush(inst, nil, true)
		m.discard.Add(1)
		if ctx.Err() != nil {
			return nil, err
		}
		return nil, fmt.Errorf("instantiate: %w", err)
	}
	m.created.Add(1)
	inst.mod = mod
	inst.mem = mod.Memory()
	inst.abi = mod.ExportedFunction(wire.ExportABIVersion)
	inst.alloc = mod.ExportedFunction(wire.ExportAlloc)
	inst.free = mod.ExportedFunction(wire.ExportFree)
	for _, op := range wire.Ops {
		if fn := mod.ExportedFunction(wire.OpExport(op)); fn != nil {
			inst.ops[op] = fn
		}
	}
	if inst.mem == nil {
		_ = mod.Close(context.Background())
		return nil, errors.New("module has no memory")
	}
	return inst, nil
}

// minInput is the smallest input buffer the host asks for.
const minInput = 4096

// run does one op: write the input into the buffer the host holds (asking
// for a bigger one first if needed), call the op and copy the result out.
// The result buffer belongs to the module and is valid until its next
// export call. Any error leaves the instance suspect.
func (i *instance) run(ctx context.Context, op string, input []byte) ([]byte, error) {
	st := i.stack
	if uint32(len(input)) > i.inCap || i.inPtr == 0 {
		if i.inPtr != 0 {
			st[0] = uint64(i.inPtr)
			if err := i.free.CallWithStack(ctx, st); err != nil {
				return nil, err
			}
			i.inPtr, i.inCap = 0, 0
		}
		size := max(uint32(len(input)), minInput)
		st[0] = uint64(size)
		if err := i.alloc.CallWithStack(ctx, st); err != nil {
			return nil, err
		}
		p := api.DecodeU32(st[0])
		if p == 0 {
			return nil, fmt.Errorf("%s(%d) returned 0", wire.ExportAlloc, size)
		}
		if _, ok := i.mem.Read(p, size); !ok {
			return nil, fmt.Errorf("%s(%d) returned offset %d, outside the module's memory", wire.ExportAlloc, size, p)
		}
		i.inPtr, i.inCap = p, size
	}
	if !i.mem.Write(i.inPtr, input) {
		return nil, fmt.Errorf("input buffer at offset %d is outside the module's memory", i.inPtr)
	}
	st[0], st[1] = uint64(i.inPtr), uint64(len(input))
	if err := i.ops[op].CallWithStack(ctx, st); err != nil {
		return nil, err
	}
	packed := st[0]
	ptr, n := uint32(packed>>32), uint32(packed)
	if packed == 0 {
		return nil, fmt.Errorf("%s returned no result", wire.OpExport(op))
	}
	if n > MaxResultBytes {
		return nil, fmt.Errorf("%s returned %d bytes; the limit is %d", wire.OpExport(op), n, MaxResultBytes)
	}
	b, ok := i.mem.Read(ptr, n)
	if !ok {
		return nil, fmt.Errorf("%s returned a result (offset %d, length %d) outside the module's memory", wire.OpExport(op), ptr, n)
	}
	return bytes.Clone(b), nil
}

// flush moves what the instance wrote to stdout and stderr into the log,
// scrubbed of the call's secrets, and returns the stderr text.
func (m *Module) flush(inst *instance, hc *hostcall.Call, failed bool) []byte {
	level := slog.LevelInfo
	if failed {
		level = slog.LevelWarn
	}
	var stderr []byte
	for _, s := range []struct {
		name string
		buf  *logBuffer
	}{{"stdout", inst.stdout}, {"stderr", inst.stderr}} {
		data, dropped := s.buf.take()
		if s.name == "stderr" {
			stderr = data
		}
		if len(data) == 0 && dropped == 0 {
			continue
		}
		text := hc.Redact(strings.ToValidUTF8(string(data), "?"))
		lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
		const maxLines = 40
		for n, line := range lines {
			if n == maxLines {
				m.log.Log(context.Background(), level, "module output truncated", "stream", s.name, "lines_dropped", len(lines)-maxLines)
				break
			}
			m.log.Log(context.Background(), level, "module output", "stream", s.name, "line", line)
		}
		if dropped > 0 {
			m.log.Log(context.Background(), level, "module output truncated", "stream", s.name, "bytes_dropped", dropped)
		}
	}
	return stderr
}

// logBuffer keeps the first max bytes written to it and counts the rest.
type logBuffer struct {
	mu      sync.Mutex
	buf     []byte
	max     int
	dropped int
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	room := b.max - len(b.buf)
	if room < 0 {
		room = 0
	}
	if len(p) > room {
		b.dropped += len(p) - room
		b.buf = append(b.buf, p[:room]...)
	} else {
		b.buf = append(b.buf, p...)
	}
	return len(p), nil
}

func (b *logBuffer) take() ([]byte, int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	data, dropped := b.buf, b.dropped
	b.buf, b.dropped = nil, 0
	return data, dropped
}
