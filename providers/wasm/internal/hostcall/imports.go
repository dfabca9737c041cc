package hostcall

import (
	"context"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/canvasapp/companion/providers/wasm/internal/wire"
)

// Return codes of the host functions (ABI.md "Imports").
const (
	// CodeRefused: the arguments were unusable (out-of-bounds buffer,
	// absurd length, no call in progress). The module broke a rule and is
	// discarded after the call.
	CodeRefused = -1
	// CodeNoResult: http_result was called with no pending result.
	CodeNoResult = -2
	// CodeShortBuffer: the buffer given to http_result is smaller than the
	// pending result, which is kept.
	CodeShortBuffer = -3
)

// Signatures of the imports, for shape checks.
var (
	HTTPRequestParams = []api.ValueType{api.ValueTypeI32, api.ValueTypeI32}
	HTTPRequestResult = []api.ValueType{api.ValueTypeI32}
)

// Instantiate adds the "companion" host module to rt.
func Instantiate(ctx context.Context, rt wazero.Runtime) error {
	_, err := rt.NewHostModuleBuilder(wire.ImportModule).
		NewFunctionBuilder().
		WithGoModuleFunction(api.GoModuleFunc(httpRequest), HTTPRequestParams, HTTPRequestResult).
		WithParameterNames("req_ptr", "req_len").
		Export(wire.ImportHTTP).
		NewFunctionBuilder().
		WithGoModuleFunction(api.GoModuleFunc(httpResult), HTTPRequestParams, HTTPRequestResult).
		WithParameterNames("buf_ptr", "buf_len").
		Export(wire.ImportHTTPResult).
		Instantiate(ctx)
	return err
}

// httpRequest(req_ptr, req_len) -> n: reads the request JSON, carries it
// out and keeps the result for http_result; n is its length.
func httpRequest(ctx context.Context, mod api.Module, stack []uint64) {
	c := callFrom(ctx)
	ptr, n := api.DecodeU32(stack[0]), api.DecodeU32(stack[1])
	stack[0] = api.EncodeI32(CodeRefused)
	if c == nil {
		return
	}
	c.pending = nil
	if n == 0 || n > MaxRequestBytes {
		c.Violate("http_request was given a request length of %d bytes; it must be 1 to %d", n, MaxRequestBytes)
		return
	}
	mem := mod.Memory()
	if mem == nil {
		c.Violate("http_request was called by a module without memory")
		return
	}
	buf, ok := mem.Read(ptr, n)
	if !ok {
		c.Violate("http_request was given a buffer (offset %d, length %d) outside the module's %d-byte memory", ptr, n, mem.Size())
		return
	}
	// Read returns a view that a memory.grow would cut off: copy now.
	req := append([]byte(nil), buf...)
	c.pending = c.Do(ctx, req)
	stack[0] = api.EncodeI32(int32(len(c.pending)))
}

// httpResult(buf_ptr, buf_len) -> n: copies the pending result into the
// module's buffer and forgets it.
func httpResult(ctx context.Context, mod api.Module, stack []uint64) {
	c := callFrom(ctx)
	ptr, n := api.DecodeU32(stack[0]), api.DecodeU32(stack[1])
	switch {
	case c == nil:
		stack[0] = api.EncodeI32(CodeRefused)
		return
	case c.pending == nil:
		stack[0] = api.EncodeI32(CodeNoResult)
		return
	case uint64(n) < uint64(len(c.pending)):
		stack[0] = api.EncodeI32(CodeShortBuffer)
		return
	}
	mem := mod.Memory()
	if mem == nil || !mem.Write(ptr, c.pending) {
		size := uint32(0)
		if mem != nil {
			size = mem.Size()
		}
		c.Violate("http_result was given a buffer (offset %d, length %d) outside the module's %d-byte memory", ptr, len(c.pending), size)
		stack[0] = api.EncodeI32(CodeRefused)
		return
	}
	stack[0] = api.EncodeI32(int32(len(c.pending)))
	c.pending = nil
}
