package main

// benchExport: a tar.gz archive streamed from the agent-server emulator
// into a verified export (hashed while streaming, fsynced, read back),
// against a raw io.Copy of the same route's bytes to the same disk in the
// same run. The archive's size is COMPANION_BENCH_EXPORT_MIB (default
// 1024, the 1 GiB).
func benchExport() error {
	res, err := goBench("./e2e/agentserver", "ExportArchive", "1x")
	if err != nil {
		return err
	}
	const b = "BenchmarkExportArchive"
	export, err := metric(res, b, "export-MiB/s")
	if err != nil {
		return err
	}
	raw, err := metric(res, b, "raw-MiB/s")
	if err != nil {
		return err
	}
	rss, err := metric(res, b, "rss-growth-MiB")
	if err != nil {
		return err
	}
	emit(figure{Name: "export.verified_archive_stream_rate", Value: export, Unit: "MiB/s",
		Baseline: "export.raw_io_copy_rate", BaselineValue: raw, Ratio: export / raw,
		Goal: "ratio >= 0.8", Met: met(export/raw >= 0.8)})
	emit(figure{Name: "export.raw_io_copy_rate", Value: raw, Unit: "MiB/s"})
	emit(figure{Name: "export.resident_memory_growth", Value: rss, Unit: "MiB",
		Ratio: rss / 32, Goal: "value <= 32 MiB (ratio is value/goal)", Met: met(rss <= 32)})
	return nil
}
