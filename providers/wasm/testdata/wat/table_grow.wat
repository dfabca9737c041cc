;; table_grow.wat: a table without a maximum (as Go's linker emits), and a
;; list that asks table.grow for a billion elements (8 GB). The host caps
;; the table, so the grow fails (-1) and list answers no boxes; had it
;; grown, list answers an error.
(module
  (memory (export "memory") 2)
  (table 1 funcref)
  (data (i32.const 1024) "{\22ok\22:{\22name\22:\22table-grow\22,\22version\22:\220.0.1\22}}")
  (data (i32.const 2048) "{\22ok\22:{\22boxes\22:[]}}")
  (data (i32.const 3072) "{\22error\22:{\22kind\22:\22internal\22,\22message\22:\22the table grew\22}}")
  (func (export "companion_alloc") (param $n i32) (result i32) (i32.const 65536))
  (func (export "companion_abi_version") (result i32) (i32.const 1))
  (func (export "companion_free") (param $p i32))
  (func $pack (param $ptr i32) (param $len i32) (result i64)
    (i64.or (i64.shl (i64.extend_i32_u (local.get $ptr)) (i64.const 32)) (i64.extend_i32_u (local.get $len))))
  (func (export "companion_describe") (param $in i32) (param $len i32) (result i64)
    (call $pack (i32.const 1024) (i32.const 46)))
  (func (export "companion_list") (param $in i32) (param $len i32) (result i64)
    (if (result i64) (i32.eq (table.grow 0 (ref.null func) (i32.const 1000000000)) (i32.const -1))
      (then (call $pack (i32.const 2048) (i32.const 19)))
      (else (call $pack (i32.const 3072) (i32.const 56)))))
)
