package main

// benchEngines reports the store figures of both engines from one run of
// db's BenchmarkEngines, which interleaves them round by round: upserts/s,
// a list of 10,000 workspaces, and one action's store work (lock, re-read,
// write, unlock; the lock is PostgreSQL's workspace lease, an in-process
// lock on SQLite; on PostgreSQL the lease comes with the re-read and goes
// with the write, two round trips, as core does it). Each PostgreSQL
// figure has SQLite's as its baseline.
func benchEngines() error {
	res, err := goBench("./db", "^BenchmarkEngines$", "20x")
	if err != nil {
		return err
	}
	get := func(unit string) (float64, error) { return metric(res, "BenchmarkEngines", unit) }
	var v [6]float64
	for i, unit := range []string{"postgres-upserts/s", "sqlite-upserts/s", "postgres-ms/list10k", "sqlite-ms/list10k",
		"postgres-µs/action", "sqlite-µs/action"} {
		if v[i], err = get(unit); err != nil {
			return err
		}
	}
	pgUps, liteUps, pgList, liteList, pgAct, liteAct := v[0], v[1], v[2], v[3], v[4], v[5]
	emit(figure{Name: "engines.postgres_upserts_per_second", Value: pgUps, Unit: "upserts/s",
		Baseline: "engines.sqlite_upserts_per_second", BaselineValue: liteUps, Ratio: pgUps / liteUps})
	emit(figure{Name: "engines.sqlite_upserts_per_second", Value: liteUps, Unit: "upserts/s"})
	emit(figure{Name: "engines.postgres_list_10k_workspaces", Value: pgList, Unit: "ms",
		Baseline: "engines.sqlite_list_10k_workspaces", BaselineValue: liteList, Ratio: pgList / liteList})
	emit(figure{Name: "engines.sqlite_list_10k_workspaces", Value: liteList, Unit: "ms"})
	emit(figure{Name: "engines.postgres_action_lock_read_write", Value: pgAct, Unit: "µs",
		Baseline: "engines.sqlite_action_lock_read_write", BaselineValue: liteAct, Ratio: pgAct / liteAct,
		Goal: "ratio <= 3 (PostgreSQL action overhead at most 3x SQLite's)", Met: met(pgAct/liteAct <= 3)})
	emit(figure{Name: "engines.sqlite_action_lock_read_write", Value: liteAct, Unit: "µs"})
	// Core re-reads from memory on SQLite: the same PostgreSQL figure
	// against SQLite's action as core runs it there, for reference.
	liteCore, err := get("sqlite-µs/action-memread")
	if err != nil {
		return err
	}
	emit(figure{Name: "engines.postgres_action_vs_sqlite_memory_reread", Value: pgAct, Unit: "µs",
		Baseline: "engines.sqlite_action_lock_memory_reread_write", BaselineValue: liteCore, Ratio: pgAct / liteCore})
	emit(figure{Name: "engines.sqlite_action_lock_memory_reread_write", Value: liteCore, Unit: "µs"})
	return nil
}
