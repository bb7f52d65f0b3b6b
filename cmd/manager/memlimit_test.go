package main

import "testing"

func TestTheSoftMemoryLimitIsSevenEighthsOfTheCgroupLimit(t *testing.T) {
	for _, tc := range []struct {
		name    string
		content string
		want    int64
		ok      bool
	}{
		{"cgroup v2 with a 256 MiB limit", "268435456\n", 234881024, true},
		{"cgroup v2 without a limit", "max\n", 0, false},
		{"cgroup v1 without a limit", "9223372036854771712\n", 0, false},
		{"an unreadable value", "lots", 0, false},
		{"an empty file", "", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := softLimit(tc.content)
			if got != tc.want || ok != tc.ok {
				t.Fatalf("softLimit(%q) = %d, %v; want %d, %v", tc.content, got, ok, tc.want, tc.ok)
			}
		})
	}
}
