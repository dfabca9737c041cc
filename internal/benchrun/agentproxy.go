package main

// benchAgentProxy: companion's agent proxy in front of the agent-server
// emulator against the same agent-server reached directly, in the same
// run (BenchmarkAgentProxy in e2e/agentserver): the added latency of a
// proxied request (p50 and p99), WebSocket message throughput through the
// proxy against direct (goal: at least 0.8 of it), and what one open
// proxied socket costs beyond a direct one.
func benchAgentProxy() error {
	res, err := goBench("./e2e/agentserver", "AgentProxy", "1x")
	if err != nil {
		return err
	}
	const b = "BenchmarkAgentProxy"
	vals := map[string]float64{}
	for _, m := range []string{"direct-p50-ms", "direct-p99-ms", "proxied-p50-ms", "proxied-p99-ms",
		"direct-msgs/s", "proxied-msgs/s", "direct-KiB/socket", "proxy-KiB/socket"} {
		v, err := metric(res, b, m)
		if err != nil {
			return err
		}
		vals[m] = v
	}
	for _, q := range []string{"p50", "p99"} {
		d, p := vals["direct-"+q+"-ms"], vals["proxied-"+q+"-ms"]
		emit(figure{Name: "agentproxy.request_latency_" + q, Value: p, Unit: "ms",
			Baseline: "agentproxy.direct_request_latency_" + q, BaselineValue: d, Ratio: p / d})
		emit(figure{Name: "agentproxy.direct_request_latency_" + q, Value: d, Unit: "ms"})
		emit(figure{Name: "agentproxy.added_latency_" + q, Value: p - d, Unit: "ms"})
	}
	d, p := vals["direct-msgs/s"], vals["proxied-msgs/s"]
	emit(figure{Name: "agentproxy.websocket_throughput", Value: p, Unit: "msgs/s",
		Baseline: "agentproxy.direct_websocket_throughput", BaselineValue: d, Ratio: p / d,
		Goal: "ratio >= 0.8", Met: met(p/d >= 0.8)})
	emit(figure{Name: "agentproxy.direct_websocket_throughput", Value: d, Unit: "msgs/s"})
	emit(figure{Name: "agentproxy.memory_added_per_proxied_socket", Value: vals["proxy-KiB/socket"], Unit: "KiB",
		Baseline: "agentproxy.memory_per_direct_socket", BaselineValue: vals["direct-KiB/socket"],
		Ratio: vals["proxy-KiB/socket"] / vals["direct-KiB/socket"]})
	emit(figure{Name: "agentproxy.memory_per_direct_socket", Value: vals["direct-KiB/socket"], Unit: "KiB"})
	return nil
}
