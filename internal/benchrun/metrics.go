package main

// benchMetrics measures what the metrics middleware adds to a request
// (issue 25: within 5%): over loopback HTTP as a client sees it, and on
// the handler chain alone, each against the same chain without it in the
// same run (metrics/bench_test.go).
func benchMetrics() error {
	res, err := goBench("./metrics", "MiddlewareOverhead", "40000x")
	if err != nil {
		return err
	}
	for _, v := range []struct{ sub, name string }{{"http", "metrics.request_http"}, {"handler", "metrics.request_handler_chain"}} {
		bench := "BenchmarkMiddlewareOverhead/" + v.sub
		off, err := metric(res, bench, "off-ns/op")
		if err != nil {
			return err
		}
		on, err := metric(res, bench, "on-ns/op")
		if err != nil {
			return err
		}
		f := figure{Name: v.name + "_metrics_on", Value: on / 1000, Unit: "µs",
			Baseline: v.name + "_metrics_off", BaselineValue: off / 1000, Ratio: on / off}
		if v.sub == "http" {
			f.Goal = "ratio <= 1.05 (the middleware adds at most 5% to a request)"
			f.Met = met(on/off <= 1.05)
		}
		emit(f)
		emit(figure{Name: v.name + "_metrics_added", Value: on - off, Unit: "ns"})
	}
	return nil
}
