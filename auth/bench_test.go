package auth_test

import (
	"testing"
	"time"

	"github.com/canvasapp/companion/auth"
)

// BenchmarkPasswordHash is one argon2id hash at DefaultParams: the cost
// of a sign-in (and of an unknown user's, which verifies a dummy hash).
func BenchmarkPasswordHash(b *testing.B) {
	start := time.Now()
	n := 0
	for b.Loop() {
		if _, err := auth.HashPassword("correct horse battery", auth.DefaultParams); err != nil {
			b.Fatal(err)
		}
		n++
	}
	b.ReportMetric(float64(time.Since(start).Microseconds())/1000/float64(n), "ms/hash")
}
