package docgen

import "testing"

func TestTable(t *testing.T) {
	got := Table([]string{"a", "b"}, [][]string{{"x|y", "two\nlines"}, {Code("`q`"), Code("")}})
	want := "| a | b |\n|---|---|\n| x\\|y | two lines |\n| `` `q` `` |  |\n"
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

func TestFirstDiff(t *testing.T) {
	if got := firstDiff("a\nb\nc", "a\nx\nc"); got != 2 {
		t.Errorf("firstDiff = %d, want 2", got)
	}
	if got := firstDiff("a\nb", "a\nb\nc"); got != 3 {
		t.Errorf("firstDiff = %d, want 3", got)
	}
}
