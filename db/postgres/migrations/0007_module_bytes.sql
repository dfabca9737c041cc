-- 0007: an installed provider module's bytes live with its pin, so every
-- serve replica on this database can load a module installed through any
-- of them (or with `companion providers install --database-file`), and a
-- removal (the row's deletion) reaches all of them. NULL for a pin made
-- before this migration (or copied from SQLite, where the bytes are a
-- file in the data dir): a replica that has the file fills it in.
ALTER TABLE module_pins ADD COLUMN wasm BYTEA;
