package main

import (
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		name, yaml, want string // want: in the error; "" for none
	}{
		{"distinct keys", "a: 1\nb: {c: 2}\n", ""},
		{"the same key in two mappings", "a: {x: 1}\nb: {x: 2}\n", ""},
		{"several documents", "a: 1\n---\na: 2\n", ""},
		{"a repeated top-level key", "nameOverride: \"\"\nimage: {}\nnameOverride: \"\"\n", `mapping key "nameOverride" already defined at line 1`},
		{"a repeated nested key", "a:\n  b: 1\n  b: 2\n", `"b" already defined`},
		{"a repeated key in a later document", "a: 1\n---\nx: 1\nx: 2\n", "document 2"},
		{"not YAML", "a: [1\n", "document 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := check([]byte(tc.yaml))
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.want != "" && err == nil:
				t.Errorf("accepted; want an error with %q", tc.want)
			case tc.want != "" && !strings.Contains(err.Error(), tc.want):
				t.Errorf("error %q does not contain %q", err, tc.want)
			}
		})
	}
}

func TestTheChartTemplatesAreNotYAML(t *testing.T) {
	if !skipped("charts/task-operator/templates/deployment.yaml") || skipped("charts/task-operator/values.yaml") {
		t.Error("skipped must cover the chart's templates and nothing else")
	}
}
