package main

// groups lists what `make bench` measures. Each Go benchmark named here is
// in its package's bench_test.go; the goals are the issues' targets.
func groups(startupRuns, rounds int) []group {
	return []group{
		{"startup", func() error { return measureStartup(startupRuns) }},
		{"startup-heap", benchIdleHeap},
		{"store", benchStore},
		{"store-vs-sqlite", benchStoreVsSQLite},
		{"store-engines", benchEngines},
		{"stream", benchStream},
		{"stream-proc", func() error { return benchStreamProcess(rounds) }},
		{"stream-memory", benchIdleMemory},
		{"wasm", benchWasm},
		{"wasm-first-call", benchFirstCalls},
		{"export", benchExport},
		{"export-store", benchExportStore},
		{"retention", benchRetention},
		{"page", benchPage},
		{"login", benchLogin},
		{"replicas", benchReplicas},
		{"agentproxy", benchAgentProxy},
		{"metrics", benchMetrics},
	}
}

func benchWasm() error {
	res, err := goBench("./providers/wasm", "ListPerCall|Compile|InstanceMemory", "")
	if err != nil {
		return err
	}
	const per = "BenchmarkListPerCall/"
	wasm, err := metric(res, per+"wasm-pooled", "ns/op")
	if err != nil {
		return err
	}
	proc, err := metric(res, per+"process-per-call", "ns/op")
	if err != nil {
		return err
	}
	native, err := metric(res, per+"builtin-go", "ns/op")
	if err != nil {
		return err
	}
	wat, err := metric(res, per+"wasm-pooled-wat", "ns/op")
	if err != nil {
		return err
	}
	us := func(ns float64) float64 { return ns / 1000 }
	emit(figure{Name: "wasm.pooled_call_no_http", Value: us(wasm), Unit: "µs",
		Baseline: "wasm.process_per_call", BaselineValue: us(proc), Ratio: wasm / proc,
		Goal: "value <= 150 µs with every limit on, and at least 30x faster than the baseline (ratio <= 0.0333)",
		Met:  met(us(wasm) <= 150 && proc/wasm >= 30)})
	emit(figure{Name: "wasm.process_per_call", Value: us(proc), Unit: "µs"})
	emit(figure{Name: "wasm.builtin_go_adapter_call", Value: us(native), Unit: "µs",
		Baseline: "wasm.pooled_call_no_http", BaselineValue: us(wasm), Ratio: native / wasm})
	emit(figure{Name: "wasm.pooled_call_hand_written_module", Value: us(wat), Unit: "µs",
		Baseline: "wasm.pooled_call_no_http", BaselineValue: us(wasm), Ratio: wat / wasm})
	for _, m := range []string{"good-go", "minimal-wat", "daytona", "e2b", "digitalocean"} {
		cold, err := metric(res, "BenchmarkCompile/cold/"+m, "compile-ms")
		if err != nil {
			return err
		}
		hit, err := metric(res, "BenchmarkCompile/cache-hit/"+m, "compile-ms")
		if err != nil {
			return err
		}
		emit(figure{Name: "wasm.compile_cache_hit." + m, Value: hit, Unit: "ms",
			Baseline: "wasm.compile_cold." + m, BaselineValue: cold, Ratio: hit / cold})
		emit(figure{Name: "wasm.compile_cold." + m, Value: cold, Unit: "ms"})
	}
	if err := benchFirstUse(); err != nil {
		return err
	}
	linear, err := metric(res, "BenchmarkInstanceMemory", "linear-bytes/instance")
	if err != nil {
		return err
	}
	heap, err := metric(res, "BenchmarkInstanceMemory", "heap-bytes/instance")
	if err != nil {
		return err
	}
	emit(figure{Name: "wasm.warm_instance_linear_memory", Value: linear, Unit: "bytes"})
	emit(figure{Name: "wasm.warm_instance_host_heap", Value: heap, Unit: "bytes"})
	return benchWasmMemory()
}

// benchFirstUse: how long a first-party module's first use waits on a
// fresh data dir when it runs interpreted while it compiles, against
// waiting for the compiler.
func benchFirstUse() error {
	res, err := goBench("./providers/wasm", "FirstUse", "3x")
	if err != nil {
		return err
	}
	for _, m := range []string{"daytona", "e2b", "digitalocean"} {
		compiled, err := metric(res, "BenchmarkFirstUse/compiler/"+m, "first-use-ms")
		if err != nil {
			return err
		}
		interp, err := metric(res, "BenchmarkFirstUse/interpreter-first/"+m, "first-use-ms")
		if err != nil {
			return err
		}
		emit(figure{Name: "wasm.first_use_interpreted." + m, Value: interp, Unit: "ms",
			Baseline: "wasm.first_use_compiled." + m, BaselineValue: compiled, Ratio: interp / compiled})
		emit(figure{Name: "wasm.first_use_compiled." + m, Value: compiled, Unit: "ms"})
	}
	return nil
}

// benchWasmMemory: host RSS after 1,000 calls each on 10 modules that grow
// their linear memory to the maximum, against the sum of their budgets.
func benchWasmMemory() error {
	res, err := goBench("./providers/wasm", "MemoryAtMaximum", "1x")
	if err != nil {
		return err
	}
	const b = "BenchmarkMemoryAtMaximum"
	growth, err := metric(res, b, "rss-growth-MiB")
	if err != nil {
		return err
	}
	budget, err := metric(res, b, "budget-sum-MiB")
	if err != nil {
		return err
	}
	emit(figure{Name: "wasm.rss_growth_10_modules_at_max_memory", Value: growth, Unit: "MiB",
		Baseline: "wasm.memory_budget_sum_10_modules", BaselineValue: budget, Ratio: growth / budget,
		Goal: "ratio <= 1 (host RSS growth within the sum of the modules' budgets)",
		Met:  met(growth <= budget)})
	return nil
}

func benchStore() error {
	res, err := goBench("./db", "SaveWorkspace$|ListWorkspaces10k|ChangesSince", "")
	if err != nil {
		return err
	}
	ups, err := metric(res, "BenchmarkSaveWorkspace", "upserts/s")
	if err != nil {
		return err
	}
	list, err := metric(res, "BenchmarkListWorkspaces10k", "ms/list")
	if err != nil {
		return err
	}
	since, err := metric(res, "BenchmarkChangesSince", "ns/op")
	if err != nil {
		return err
	}
	emit(figure{Name: "store.workspace_upserts_per_second", Value: ups, Unit: "upserts/s"})
	emit(figure{Name: "store.list_10k_workspaces", Value: list, Unit: "ms"})
	emit(figure{Name: "store.changes_since_last_100_of_10k", Value: since / 1e6, Unit: "ms"})
	return nil
}

func benchStream() error {
	res, err := goBench("./ui-bridge", "Snapshot10k|Fanout|IdleClientMemory", "")
	if err != nil {
		return err
	}
	snap, err := metric(res, "BenchmarkSnapshot10k/cached", "ms/snapshot")
	if err != nil {
		return err
	}
	cold, err := metric(res, "BenchmarkSnapshot10k/cold", "ms/snapshot")
	if err != nil {
		return err
	}
	p50, err := metric(res, "BenchmarkFanout", "p50-ms")
	if err != nil {
		return err
	}
	p99, err := metric(res, "BenchmarkFanout", "p99-ms")
	if err != nil {
		return err
	}
	mem, err := metric(res, "BenchmarkIdleClientMemory", "bytes/client")
	if err != nil {
		return err
	}
	emit(figure{Name: "stream.snapshot_10k_workspaces", Value: snap, Unit: "ms",
		Baseline: "stream.snapshot_10k_encoded_from_scratch", BaselineValue: cold, Ratio: snap / cold,
		Goal: "value <= 100 ms", Met: met(snap <= 100)})
	emit(figure{Name: "stream.fanout_10k_workspaces_1000_clients_p50", Value: p50, Unit: "ms"})
	emit(figure{Name: "stream.fanout_10k_workspaces_1000_clients_p99", Value: p99, Unit: "ms",
		Ratio: p99 / 50, Goal: "value <= 50 ms (ratio is value/goal)", Met: met(p99 <= 50)})
	emit(figure{Name: "stream.memory_per_idle_client", Value: mem, Unit: "bytes",
		Ratio: mem / 65536, Goal: "value <= 64 KiB (ratio is value/goal)", Met: met(mem <= 65536)})
	return nil
}

// benchIdleHeap: the heap companion holds once 10,000 workspaces are
// loaded and no client is connected, against the heap of the same
// workspaces as db lists them (the least any process holding them needs).
func benchIdleHeap() error {
	res, err := goBench("./cmd/companion", "IdleHeap", "1x")
	if err != nil {
		return err
	}
	const per = "BenchmarkIdleHeap/workspaces="
	empty, err := metric(res, per+"0", "companion-heap-MiB")
	if err != nil {
		return err
	}
	full, err := metric(res, per+"10000", "companion-heap-MiB")
	if err != nil {
		return err
	}
	list, err := metric(res, per+"10000", "list-heap-MiB")
	if err != nil {
		return err
	}
	// companion holds the feed's copy of every workspace, the stream's
	// encoded copy and fixed buffers: three lists' worth at most.
	emit(figure{Name: "startup.idle_heap_10k_workspaces", Value: full, Unit: "MiB",
		Baseline: "startup.heap_of_10k_workspaces_as_listed", BaselineValue: list, Ratio: full / list,
		Goal: "ratio <= 3 (no client connected, after a GC)", Met: met(full/list <= 3)})
	emit(figure{Name: "startup.heap_of_10k_workspaces_as_listed", Value: list, Unit: "MiB"})
	emit(figure{Name: "startup.idle_heap_0_workspaces", Value: empty, Unit: "MiB",
		Baseline: "startup.idle_heap_10k_workspaces", BaselineValue: full, Ratio: empty / full})
	return nil
}
