;; minimal.wat: a companion provider module written by hand in
;; WebAssembly text, to show that ABI v1 does not depend on the Go SDK.
;; It implements describe and list; list makes one request to the "api"
;; upstream (the host adds the credential) and returns an empty list, or an
;; error if the host reports one.
;;
;;   wat2wasm minimal.wat -o minimal.raw.wasm
;;   companion providers pack --manifest manifest.json -o minimal.wasm minimal.raw.wasm
;;
;; Memory layout: static JSON in page 0; the host's input buffer and the
;; HTTP result live from page 1 up (a bump allocator that starts over at
;; every companion_alloc, since the host holds at most one input at a time).
(module
  (import "companion" "http_request" (func $http_request (param i32 i32) (result i32)))
  (import "companion" "http_result" (func $http_result (param i32 i32) (result i32)))

  (memory (export "memory") 2)

  (data (i32.const 1024) "{\22ok\22:{\22name\22:\22minimal\22,\22version\22:\220.1.0\22}}")
  (data (i32.const 1075) "{\22upstream\22:\22api\22,\22method\22:\22GET\22,\22path\22:\22/ping\22}")
  (data (i32.const 1131) "{\22ok\22:{\22boxes\22:[]}}")
  (data (i32.const 1158) "{\22error\22:{\22kind\22:\22unavailable\22,\22message\22:\22the ping request failed\22}}")
  (data (i32.const 1234) "{\22error\22:")

  ;; first free byte after the current input buffer
  (global $heap (mut i32) (i32.const 65536))

  (func (export "companion_abi_version") (result i32) (i32.const 1))

  ;; ensure memory covers [0, end); returns 0 when it cannot grow
  (func $ensure (param $end i32) (result i32)
    (local $have i32)
    (local.set $have (i32.mul (memory.size) (i32.const 65536)))
    (if (i32.le_u (local.get $end) (local.get $have)) (then (return (i32.const 1))))
    (i32.ne
      (memory.grow (i32.div_u (i32.add (i32.sub (local.get $end) (local.get $have)) (i32.const 65535)) (i32.const 65536)))
      (i32.const -1)))

  (func (export "companion_alloc") (param $n i32) (result i32)
    (if (i32.eqz (call $ensure (i32.add (i32.const 65536) (local.get $n)))) (then (return (i32.const 0))))
    (global.set $heap (i32.and (i32.add (i32.add (i32.const 65536) (local.get $n)) (i32.const 7)) (i32.const -8)))
    (i32.const 65536))

  ;; static results and the single input slot need no freeing
  (func (export "companion_free") (param $p i32))

  (func $pack (param $ptr i32) (param $len i32) (result i64)
    (i64.or (i64.shl (i64.extend_i32_u (local.get $ptr)) (i64.const 32)) (i64.extend_i32_u (local.get $len))))

  (func (export "companion_describe") (param $in i32) (param $len i32) (result i64)
    (call $pack (i32.const 1024) (i32.const 43)))

  (func (export "companion_list") (param $in i32) (param $len i32) (result i64)
    (local $n i32)
    (local $buf i32)
    (local.set $n (call $http_request (i32.const 1075) (i32.const 48)))
    (if (i32.lt_s (local.get $n) (i32.const 0))
      (then (return (call $pack (i32.const 1158) (i32.const 68)))))
    (local.set $buf (global.get $heap))
    (if (i32.eqz (call $ensure (i32.add (local.get $buf) (local.get $n))))
      (then (return (call $pack (i32.const 1158) (i32.const 68)))))
    (if (i32.ne (call $http_result (local.get $buf) (local.get $n)) (local.get $n))
      (then (return (call $pack (i32.const 1158) (i32.const 68)))))
    ;; the host writes a failure as {"error":...} with no other member
    (if (i32.and
          (i64.eq (i64.load (local.get $buf)) (i64.load (i32.const 1234)))
          (i32.eq (i32.load8_u offset=8 (local.get $buf)) (i32.load8_u (i32.const 1242))))
      (then (return (call $pack (i32.const 1158) (i32.const 68)))))
    (call $pack (i32.const 1131) (i32.const 19)))
)
