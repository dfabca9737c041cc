//go:build wasip1

// The exports are called by the host, which staticcheck cannot see.
//lint:file-ignore U1000 reached through wasmexport directives

package sdk

import (
	"runtime"
	"unsafe"
)

// pins keeps every buffer the host allocated reachable until the host
// frees it (Go's collector does not move objects, so an address stays
// valid while the slice is referenced). The result of an op is written to
// out, which the module owns: the host copies it before its next call.
var (
	pins = map[uint32][]byte{}
	out  encoder
)

func addr(b []byte) uint32 { return uint32(uintptr(unsafe.Pointer(unsafe.SliceData(b)))) }

//go:wasmexport companion_abi_version
func exportABIVersion() int32 { return ABIVersion }

//go:wasmexport companion_alloc
func exportAlloc(size uint32) uint32 {
	b := make([]byte, max(size, 1))
	p := addr(b)
	pins[p] = b
	return p
}

//go:wasmexport companion_free
func exportFree(ptr uint32) {
	if len(lastIn) > 0 && addr(lastIn) == ptr {
		lastIn = nil
	}
	delete(pins, ptr)
}

// lastIn caches the input buffer's pin lookup: the host reuses one buffer.
var lastIn []byte

func call(op op, ptr, n uint32) uint64 {
	in := lastIn
	if len(in) == 0 || addr(in) != ptr {
		in = pins[ptr]
		lastIn = in
	}
	if cap(out.b) > 1<<20 {
		out.b = make([]byte, 0, 4096) // do not keep a huge buffer from a big answer
	}
	out.b = out.b[:0]
	if uint32(len(in)) < n {
		out.errorEnvelope(Errorf(Internal, "input buffer %d was not allocated by companion_alloc", ptr))
	} else {
		dispatch(&out, op, in[:n])
	}
	return uint64(addr(out.b))<<32 | uint64(uint32(len(out.b)))
}

//go:wasmexport companion_describe
func exportDescribe(ptr, n uint32) uint64 { return call(opDescribe, ptr, n) }

//go:wasmexport companion_list
func exportList(ptr, n uint32) uint64 { return call(opList, ptr, n) }

//go:wasmexport companion_get
func exportGet(ptr, n uint32) uint64 { return call(opGet, ptr, n) }

//go:wasmexport companion_create
func exportCreate(ptr, n uint32) uint64 { return call(opCreate, ptr, n) }

//go:wasmexport companion_suspend
func exportSuspend(ptr, n uint32) uint64 { return call(opSuspend, ptr, n) }

//go:wasmexport companion_resume
func exportResume(ptr, n uint32) uint64 { return call(opResume, ptr, n) }

//go:wasmexport companion_delete
func exportDelete(ptr, n uint32) uint64 { return call(opDelete, ptr, n) }

//go:wasmexport companion_endpoint
func exportEndpoint(ptr, n uint32) uint64 { return call(opEndpoint, ptr, n) }

//go:wasmimport companion http_request
func hostHTTPRequest(ptr, n uint32) int32

//go:wasmimport companion http_result
func hostHTTPResult(ptr, n uint32) int32

// hostHTTP hands a request to the host and reads the result: first its
// size, then the bytes into a buffer of that size (the host never calls
// back into the module).
func hostHTTP(req []byte) ([]byte, error) {
	n := hostHTTPRequest(uint32(uintptr(unsafe.Pointer(unsafe.SliceData(req)))), uint32(len(req)))
	runtime.KeepAlive(req)
	if n < 0 {
		return nil, &Error{Kind: Forbidden, Message: "the host refused the request buffer", FromHost: true}
	}
	buf := make([]byte, n)
	got := hostHTTPResult(uint32(uintptr(unsafe.Pointer(unsafe.SliceData(buf)))), uint32(n))
	runtime.KeepAlive(buf)
	if got != n {
		return nil, &Error{Kind: Internal, Message: "the host did not deliver the result", FromHost: true}
	}
	return buf, nil
}
