package status

import (
	"time"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// MaxMessage bounds lastError, history messages, condition messages and
// event notes (the contract: 1 KiB).
const MaxMessage = 1024

// Tail keeps the last n bytes of s, on a rune boundary, marking a cut:
// the end of a log says most about why it failed.
func Tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const cut = "..."
	if n <= len(cut) {
		return cut[:max(n, 0)]
	}
	s = s[len(s)-(n-len(cut)):]
	for len(s) > 0 && !utf8.RuneStart(s[0]) {
		s = s[1:]
	}
	return cut + s
}

// Head keeps the first n bytes of s, on a rune boundary, marking a cut.
func Head(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const cut = "..."
	s = s[:max(n-len(cut), 0)]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + cut
}

// Time is a status timestamp: whole seconds in UTC, as the API stores
// them, so an unchanged status compares equal to the stored one.
func Time(t time.Time) *metav1.Time {
	mt := metav1.NewTime(t.UTC().Truncate(time.Second))
	return &mt
}

func timeOf(t *metav1.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.Time
}
