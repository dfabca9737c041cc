package main

// benchReplicas: cross-replica fan-out on PostgreSQL. One upsert saved
// through replica A reaches 500 stream clients of replica B (NOTIFY, then
// B reads the row) against the same upsert at 500 clients of A, the
// single-replica path, timed in the same rounds.
func benchReplicas() error {
	res, err := goBench("./ui-bridge", "FanoutAcrossReplicas", "60x")
	if err != nil {
		return err
	}
	const bench = "BenchmarkFanoutAcrossReplicas"
	get := func(unit string) (float64, error) { return metric(res, bench, unit) }
	cross50, err := get("cross-p50-ms")
	if err != nil {
		return err
	}
	cross99, err := get("cross-p99-ms")
	if err != nil {
		return err
	}
	single50, err := get("single-p50-ms")
	if err != nil {
		return err
	}
	single99, err := get("single-p99-ms")
	if err != nil {
		return err
	}
	const n = "replicas.fanout_500_clients_"
	emit(figure{Name: n + "cross_replica_p50", Value: cross50, Unit: "ms",
		Baseline: n + "single_replica_p50", BaselineValue: single50, Ratio: cross50 / single50})
	emit(figure{Name: n + "cross_replica_p99", Value: cross99, Unit: "ms",
		Baseline: n + "single_replica_p99", BaselineValue: single99, Ratio: cross99 / single99,
		Goal: "ratio <= 2 (action on A, frame at clients of B, PostgreSQL LISTEN/NOTIFY)", Met: met(cross99 <= 2*single99)})
	emit(figure{Name: n + "single_replica_p50", Value: single50, Unit: "ms"})
	emit(figure{Name: n + "single_replica_p99", Value: single99, Unit: "ms"})
	return nil
}
