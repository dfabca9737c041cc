;; init_trap.wat: _initialize traps, so any instance fails to start.
;; Inspect must still succeed (it runs no module code); install refuses it.
(module
  (memory (export "memory") 2)
  (func (export "_initialize") unreachable)
  (func (export "companion_abi_version") (result i32) (i32.const 1))
  (func (export "companion_alloc") (param $n i32) (result i32) (i32.const 65536))
  (func (export "companion_free") (param $p i32))
  (func (export "companion_describe") (param $in i32) (param $len i32) (result i64) (i64.const 0))
  (func (export "companion_list") (param $in i32) (param $len i32) (result i64) (i64.const 0))
)
