package v1alpha1

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The README's table of final failure reasons lists exactly
// FinalFailureReasons: a reason added to the API without a line there, or
// a line for a reason that does not exist, fails here.
func TestTheREADMEListsEveryFinalFailureReason(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(readme), "Final failure reasons")
	if !ok {
		t.Fatal(`README.md has no "Final failure reasons" section`)
	}
	row := regexp.MustCompile("(?m)^\\| `([A-Za-z]+)` \\|")
	var listed []string
	for _, line := range strings.Split(table, "\n")[1:] {
		if strings.TrimSpace(line) == "" && len(listed) > 0 {
			break // the end of the table
		}
		if m := row.FindStringSubmatch(line); m != nil {
			listed = append(listed, m[1])
		}
	}
	var want []string
	for _, r := range FinalFailureReasons {
		want = append(want, string(r))
	}
	slices.Sort(listed)
	slices.Sort(want)
	if !slices.Equal(listed, want) {
		t.Errorf("README lists final failure reasons %v, the API has %v", listed, want)
	}
}
