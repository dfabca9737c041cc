package main

import "os"

// benchExportStore: a 1 GiB export uploaded to a real S3 server
// (versitygw) against the AWS SDK's own multipart upload of the same
// bytes to the same server, with the RSS it grew by; and the read-back
// verification rate against a plain GET of the same object.
func benchExportStore() error {
	if os.Getenv("COMPANION_BENCH_EXPORT_MIB") == "" {
		os.Setenv("COMPANION_BENCH_EXPORT_MIB", "1024")
	}
	os.Setenv("COMPANION_REQUIRE_STORES", "1")
	res, err := goBench("./exportstore", "UploadVsSDK|VerifyVsGet", "1x")
	if err != nil {
		return err
	}
	const up, ver = "BenchmarkUploadVsSDK", "BenchmarkVerifyVsGet"
	upload, err := metric(res, up, "upload-MB/s")
	if err != nil {
		return err
	}
	sdk, err := metric(res, up, "sdk-MB/s")
	if err != nil {
		return err
	}
	rss, err := metric(res, up, "rss-growth-MiB")
	if err != nil {
		return err
	}
	verify, err := metric(res, ver, "verify-MB/s")
	if err != nil {
		return err
	}
	get, err := metric(res, ver, "get-MB/s")
	if err != nil {
		return err
	}
	emit(figure{Name: "exportstore.upload_1gib", Value: upload, Unit: "MB/s", Baseline: "aws_sdk.multipart_upload_1gib",
		BaselineValue: sdk, Ratio: upload / sdk, Goal: "ratio >= 0.8", Met: met(upload/sdk >= 0.8)})
	emit(figure{Name: "exportstore.upload_rss_growth", Value: rss, Unit: "MiB", Ratio: rss / 32,
		Goal: "<= 32 MiB", Met: met(rss <= 32)})
	emit(figure{Name: "exportstore.verify_read_back", Value: verify, Unit: "MB/s", Baseline: "plain_get",
		BaselineValue: get, Ratio: verify / get, Goal: "ratio >= 0.8", Met: met(verify/get >= 0.8)})
	return nil
}
