package main

// benchRetention: one retention tick over 100,000 scheduled workspaces
// (core's BenchmarkRetentionTick), against a pass over the in-memory feed
// that looks for due workspaces without the index.
func benchRetention() error {
	res, err := goBench("./core", "RetentionTick", "")
	if err != nil {
		return err
	}
	const b = "BenchmarkRetentionTick/"
	tick, err := metric(res, b+"indexed", "ms/tick")
	if err != nil {
		return err
	}
	scan, err := metric(res, b+"full-scan", "ms/tick")
	if err != nil {
		return err
	}
	emit(figure{Name: "retention.tick_100k_workspaces", Value: tick, Unit: "ms",
		Baseline: "retention.full_scan_100k_workspaces", BaselineValue: scan, Ratio: tick / scan,
		Goal: "value <= 50 ms", Met: met(tick <= 50)})
	emit(figure{Name: "retention.full_scan_100k_workspaces", Value: scan, Unit: "ms"})
	return nil
}
