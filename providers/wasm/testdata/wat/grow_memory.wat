;; grow_memory.wat: list grows linear memory one page at a time until the
;; host refuses, writes to every 4 KiB of it (so the pages are resident),
;; says "grew" on stdout (which the host logs) and answers no boxes. The
;; instance ends at its maximum memory.
(module
  (import "wasi_snapshot_preview1" "fd_write" (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 2)
  (data (i32.const 512) "\58\02\00\00\05\00\00\00")
  (data (i32.const 600) "grew\n")
  (data (i32.const 1024) "{\22ok\22:{\22name\22:\22grow-memory\22,\22version\22:\220.0.1\22}}")
  (data (i32.const 2048) "{\22ok\22:{\22boxes\22:[]}}")
  (func (export "companion_alloc") (param $n i32) (result i32) (i32.const 65536))
  (func (export "companion_abi_version") (result i32) (i32.const 1))
  (func (export "companion_free") (param $p i32))
  (func $pack (param $ptr i32) (param $len i32) (result i64)
    (i64.or (i64.shl (i64.extend_i32_u (local.get $ptr)) (i64.const 32)) (i64.extend_i32_u (local.get $len))))
  (func (export "companion_describe") (param $in i32) (param $len i32) (result i64)
    (call $pack (i32.const 1024) (i32.const 47)))
  (func (export "companion_list") (param $in i32) (param $len i32) (result i64)
    (local $p i32) (local $end i32)
    (block $full
      (loop $grow
        (br_if $full (i32.eq (memory.grow (i32.const 1)) (i32.const -1)))
        (br $grow)))
    (local.set $end (i32.mul (memory.size) (i32.const 65536)))
    (local.set $p (i32.const 131072))
    (block $done
      (loop $touch
        (br_if $done (i32.ge_u (local.get $p) (local.get $end)))
        (i32.store8 (local.get $p) (i32.const 1))
        (local.set $p (i32.add (local.get $p) (i32.const 4096)))
        (br $touch)))
    (drop (call $fd_write (i32.const 1) (i32.const 512) (i32.const 1) (i32.const 520)))
    (call $pack (i32.const 2048) (i32.const 19)))
)
