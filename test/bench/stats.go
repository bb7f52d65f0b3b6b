package main

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/taskops/task-operator/test/harness"
)

// percentile is the nearest-rank percentile (0 < p <= 100) of xs; NaN for none.
func percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	rank := int(math.Ceil(p / 100 * float64(len(s))))
	rank = min(max(rank, 1), len(s))
	return s[rank-1]
}

// measured are the figures of the repeats that measured one (NaN: a
// repeat without it).
func measured(xs []float64) []float64 {
	var vals []float64
	for _, x := range xs {
		if !math.IsNaN(x) {
			vals = append(vals, x)
		}
	}
	return vals
}

func minMax(xs []float64) (lo, hi float64) {
	lo, hi = math.NaN(), math.NaN()
	for i, x := range xs {
		if i == 0 || x < lo {
			lo = x
		}
		if i == 0 || x > hi {
			hi = x
		}
	}
	return lo, hi
}

// fmtNum prints a figure with 3 significant digits (integers stay whole).
func fmtNum(x float64) string {
	switch {
	case math.IsNaN(x):
		return "n/a"
	case math.IsInf(x, 0):
		return "inf"
	case x == math.Trunc(x) && math.Abs(x) < 1e6:
		return strconv.FormatFloat(x, 'f', 0, 64)
	case math.Abs(x) >= 100:
		return strconv.FormatFloat(x, 'f', 0, 64)
	case math.Abs(x) >= 10:
		return strconv.FormatFloat(x, 'f', 1, 64)
	case math.Abs(x) >= 1:
		return strconv.FormatFloat(x, 'f', 2, 64)
	case math.Abs(x) >= 0.01:
		return strconv.FormatFloat(x, 'f', 3, 64)
	default:
		return strconv.FormatFloat(x, 'g', 2, 64)
	}
}

// spread prints "median [min-max]" of the repeats (just the value for one).
func spread(xs []float64, unit string) string { return spreadWith(xs, unit, fmtNum) }

// spread3 is spread with three decimals, for figures compared with a
// whole-number target (4.001 writes per Task is not "4.00").
func spread3(xs []float64, unit string) string {
	return spreadWith(xs, unit, func(x float64) string { return strconv.FormatFloat(x, 'f', 3, 64) })
}

func spreadWith(xs []float64, unit string, fmtNum func(float64) string) string {
	vals := measured(xs)
	if unit != "" && unit != "%" {
		unit = " " + unit
	}
	if len(vals) == 0 {
		return "n/a"
	}
	m := harness.Median(vals)
	if len(vals) == 1 {
		return fmtNum(m) + unit
	}
	lo, hi := minMax(vals)
	return fmt.Sprintf("%s%s [%s-%s]", fmtNum(m), unit, fmtNum(lo), fmtNum(hi))
}

// bracketMean is the bound of a run measured between two runs of its
// oracle on one cluster: their mean, or before alone when after is NaN
// (not run).
func bracketMean(before, after float64) float64 {
	if math.IsNaN(after) {
		return before
	}
	return (before + after) / 2
}

// nonZero is x, or NaN when x is 0: a figure a repeat did not measure
// (a duration it never took).
func nonZero(x float64) float64 {
	if x == 0 {
		return math.NaN()
	}
	return x
}

// ratio is a/b, NaN when b is 0 or either is NaN.
func ratio(a, b float64) float64 {
	if b == 0 || math.IsNaN(a) || math.IsNaN(b) {
		return math.NaN()
	}
	return a / b
}

// ratios are ratio(a[i], b[i]), repeat by repeat.
func ratios(a, b []float64) []float64 {
	out := make([]float64, len(a))
	for i := range a {
		out[i] = ratio(a[i], b[i])
	}
	return out
}

func joinNonEmpty(sep string, parts ...string) string {
	var out []string
	for _, p := range parts {
		if p != "" {
			out = append(out, p)
		}
	}
	return strings.Join(out, sep)
}
