package httprunner

import (
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// MaxSummaryBytes bounds the summary. The kubelet keeps at most 4 KiB of a
// termination message and the operator cuts what it copies into the Task
// status to 1 KiB; staying below that means nothing is ever cut by someone
// who does not know where a secret or a multi-byte character ends.
const MaxSummaryBytes = 1000

// Per-field caps, so that one long field (a 2 KiB URL, a chatty error)
// cannot push the body excerpt out of the summary.
const (
	maxURLShown    = 200
	maxStatusShown = 80
	maxErrShown    = 400
	maxNoteShown   = 160
	// bodyNoteReserve is room kept for the "(truncated; ...)" note.
	bodyNoteReserve = 56
)

// Summary is the human-readable result: one "label: value" per line, on a
// single line each (control characters escaped), secrets masked, at most
// MaxSummaryBytes. The same text goes to stdout and to the termination
// message, from which the operator builds the Task's lastError.
func (r Result) Summary() string {
	red := r.redact
	var b strings.Builder
	line := func(label, text string) {
		fmt.Fprintf(&b, "%-10s %s\n", label+":", text)
	}
	// field masks secrets before cutting, so a cut can never leave the
	// beginning of a secret behind.
	field := func(s string, max int) string {
		return fitText(red.String(s), max)
	}

	result := fmt.Sprintf("%s (exit %d)", ExitName(r.ExitCode), r.ExitCode)
	if r.ExitCode == ExitBadDefinition {
		result = fmt.Sprintf("%s (exit %d, not retried)", ExitName(r.ExitCode), r.ExitCode)
	}
	line("result", result)
	if r.URL != "" {
		line("request", r.Method+" "+field(r.URL, maxURLShown))
	}
	if r.StatusCode != 0 {
		status := field(r.Status, maxStatusShown)
		if r.ExitCode == ExitUnexpectedStatus || r.ExitCode == ExitClientError {
			status += " (expected " + r.Expected + ")"
		}
		line("status", status)
	}
	if r.Redirects > 0 {
		redirects := fmt.Sprintf("%d followed", r.Redirects)
		if r.FinalURL != "" {
			redirects += ", ending at " + field(r.FinalURL, maxURLShown)
		}
		line("redirects", redirects)
	}
	if r.URL != "" {
		line("latency", formatLatency(r.Latency))
	}
	if r.Err != "" {
		line("error", field(r.Err, maxErrShown))
	}
	for _, n := range r.Notes {
		line("note", field(n, maxNoteShown))
	}
	// A refused redirect's body was never read: no body line.
	hasBody := r.StatusCode != 0 && r.Method != "HEAD" && r.ExitCode != ExitTooManyRedirects
	if hasBody && (len(r.Body) > 0 || r.BodyTruncated) {
		// The body gets what is left: it is the most useful part of a
		// failure ("invalid token", a stack trace) but also the only
		// unbounded one.
		avail := MaxSummaryBytes - b.Len() - len("body:      \n") - bodyNoteReserve
		text, n := escapeText(string(r.Body), avail, r.BodyTruncated)
		if n < len(r.Body) || r.BodyTruncated {
			switch {
			case r.ContentLength > 0:
				text += fmt.Sprintf("... (truncated; the body is %d bytes)", r.ContentLength)
			case r.BodyTruncated:
				text += fmt.Sprintf("... (truncated; only the first %d bytes were read)", MaxExcerptBytes)
			default:
				text += "... (truncated to fit the summary)"
			}
		}
		line("body", text)
	} else if hasBody {
		line("body", "(empty)")
	}

	// Mask once more over the whole text (belt and braces), then enforce
	// the bound whatever happened above.
	out := red.String(b.String())
	if len(out) > MaxSummaryBytes {
		out = cutUTF8(out, MaxSummaryBytes-1) + "\n"
	}
	return out
}

// fitText escapes s (see escapeText) to at most max bytes, ending with "..."
// when it had to be cut.
func fitText(s string, max int) string {
	text, n := escapeText(s, max, false)
	if n == len(s) {
		return text
	}
	text, _ = escapeText(s, max-len("..."), false)
	return text + "..."
}

// escapeText makes s printable on one line: tab, CR and LF become \t \r \n,
// other control characters and invalid UTF-8 bytes \xNN, other unprintable
// runes \uNNNN; everything else, non-ASCII text included, stays readable. It
// stops before the output would exceed max bytes and returns how many bytes
// of s it consumed. dropPartialRune removes an incomplete UTF-8 sequence at
// the end of s, which is what cutting a body at a byte count leaves behind.
func escapeText(s string, max int, dropPartialRune bool) (string, int) {
	if dropPartialRune {
		s = trimPartialRune(s)
	}
	var b strings.Builder
	i := 0
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		var piece string
		switch {
		case r == utf8.RuneError && size == 1:
			piece = fmt.Sprintf(`\x%02x`, s[i])
		case r == '\n':
			piece = `\n`
		case r == '\r':
			piece = `\r`
		case r == '\t':
			piece = `\t`
		case r < 0x20 || r == 0x7f:
			piece = fmt.Sprintf(`\x%02x`, r)
		case unicode.IsPrint(r):
			piece = s[i : i+size]
		case r > 0xffff:
			piece = fmt.Sprintf(`\U%08x`, r)
		default:
			piece = fmt.Sprintf(`\u%04x`, r)
		}
		if b.Len()+len(piece) > max {
			break
		}
		b.WriteString(piece)
		i += size
	}
	return b.String(), i
}

// trimPartialRune drops an incomplete UTF-8 sequence at the end of s.
func trimPartialRune(s string) string {
	for i := len(s) - 1; i >= 0 && i >= len(s)-utf8.UTFMax; i-- {
		if utf8.RuneStart(s[i]) {
			if !utf8.FullRuneInString(s[i:]) {
				return s[:i]
			}
			break
		}
	}
	return s
}

// cutUTF8 cuts s to at most n bytes without splitting a character.
func cutUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// formatLatency rounds to a precision a human reads at a glance.
func formatLatency(d time.Duration) string {
	switch {
	case d >= time.Second:
		return d.Round(time.Millisecond).String()
	case d >= time.Millisecond:
		return d.Round(100 * time.Microsecond).String()
	default:
		return d.Round(time.Microsecond).String()
	}
}
