package testutil

import (
	"testing"
	"time"
)

// BenchmarkRatio times small and large alternately on each iteration and
// reports each one's time per iteration (in the units named) and large's
// as a multiple of small's ("x"): a ratio measured in the same run, as the
// project's performance claims are ("does a pass over 10,000 cost what a
// pass over 100 does").
func BenchmarkRatio(b *testing.B, smallUnit string, small func(), largeUnit string, large func()) {
	b.Helper()
	var tSmall, tLarge time.Duration
	for b.Loop() {
		start := time.Now()
		small()
		mid := time.Now()
		large()
		tSmall, tLarge = tSmall+mid.Sub(start), tLarge+time.Since(mid)
	}
	b.ReportMetric(float64(tSmall.Nanoseconds())/float64(b.N), smallUnit)
	b.ReportMetric(float64(tLarge.Nanoseconds())/float64(b.N), largeUnit)
	b.ReportMetric(float64(tLarge)/float64(tSmall), "x")
}
