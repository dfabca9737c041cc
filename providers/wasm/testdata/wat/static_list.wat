;; static_list.wat: list answers the same three boxes as the good module's
;; mode=static, with no work at all, so the benchmarks can separate the
;; host's per-call overhead from the cost of Go guest code.
(module
  (memory (export "memory") 2)
  (data (i32.const 1024) "{\22ok\22:{\22name\22:\22static-list\22,\22version\22:\220.0.1\22}}")
  (data (i32.const 2048) "{\22ok\22:{\22boxes\22:[{\22id\22:\22b-1\22,\22state\22:\22running\22,\22name\22:\22one\22,\22labels\22:{\22companion.workspace\22:\22ws-1\22},\22created_at\22:\222025-01-01T00:00:00Z\22},{\22id\22:\22b-2\22,\22state\22:\22paused\22,\22name\22:\22two\22,\22paused_at\22:\222025-01-02T00:00:00Z\22},{\22id\22:\22b-3\22,\22state\22:\22running\22,\22name\22:\22three\22,\22size\22:{\22bytes\22:1073741824,\22source\22:\22provider_api:used\22}}]}}")
  (func (export "companion_abi_version") (result i32) (i32.const 1))
  (func (export "companion_alloc") (param $n i32) (result i32) (i32.const 65536))
  (func (export "companion_free") (param $p i32))
  (func $pack (param $ptr i32) (param $len i32) (result i64)
    (i64.or (i64.shl (i64.extend_i32_u (local.get $ptr)) (i64.const 32)) (i64.extend_i32_u (local.get $len))))
  (func (export "companion_describe") (param $in i32) (param $len i32) (result i64)
    (call $pack (i32.const 1024) (i32.const 47)))
  (func (export "companion_list") (param $in i32) (param $len i32) (result i64)
    (call $pack (i32.const 2048) (i32.const 319)))
)
