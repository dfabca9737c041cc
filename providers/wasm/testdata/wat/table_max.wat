;; table_max.wat: a small table whose declared maximum (10 million
;; elements) is above the limit. Refused before compiling.
(module
  (memory (export "memory") 2)
  (table 1 10000000 funcref)
  (data (i32.const 1024) "{\22ok\22:{\22name\22:\22table-max\22,\22version\22:\220.0.1\22}}")
  (data (i32.const 2048) "{\22ok\22:{\22boxes\22:[]}}")
  (func (export "companion_alloc") (param $n i32) (result i32) (i32.const 65536))
  (func (export "companion_abi_version") (result i32) (i32.const 1))
  (func (export "companion_free") (param $p i32))
  (func $pack (param $ptr i32) (param $len i32) (result i64)
    (i64.or (i64.shl (i64.extend_i32_u (local.get $ptr)) (i64.const 32)) (i64.extend_i32_u (local.get $len))))
  (func (export "companion_describe") (param $in i32) (param $len i32) (result i64)
    (call $pack (i32.const 1024) (i32.const 45)))
  (func (export "companion_list") (param $in i32) (param $len i32) (result i64)
    (call $pack (i32.const 2048) (i32.const 19)))
)
