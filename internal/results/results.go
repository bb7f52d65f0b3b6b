// Package results is how a run's results (spec.results) leave the pod: a
// block at the end of the task container's termination message, written by
// the shell wrapper (Wrapper) or the http runner (Append) and read back by
// the operator (Parse). It is shared by both sides and imports no HTTP
// client.
//
// The termination message is the channel because the operator already
// reads it for every finished attempt (lastError) and it needs no
// credentials in the pod, no Secret and no log reading: the kubelet keeps
// at most 4096 bytes of it, the last ones, so the block sits at the end and
// is parsed from the end, by lengths: a value may hold any bytes, newlines
// and block-like text included. Each entry is
//
//	<value>\n<name> <length of value in bytes>\n
//
// and the block ends with the trailer line
//
//	task-results-v1 <entries>[ too-large=<name>,<name>]\n
//
// The limits: a value of at most MaxValue bytes; entries of at most
// MaxBlock bytes in all, framing included, so the trailer and the block fit
// in the kubelet's 4096. What does not fit is named in too-large and left
// out (the run then says ResultsTooLarge).
package results

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

const (
	// MaxValue is the most bytes one result may have.
	MaxValue = 1024
	// MaxBlock is the most bytes the entries of one attempt may take,
	// names, lengths and newlines included.
	MaxBlock = 3584
	// trailer begins the block's last line.
	trailer = "task-results-v1 "
	// DirEnv names the folder a shell Task's pod writes its results into,
	// one file per result.
	DirEnv = "TASK_RESULTS_DIR"
	// Dir is that folder: an emptyDir the Job mounts there.
	Dir = "/task-results"
)

// entrySize is the bytes an entry takes in the block.
func entrySize(name, value string) int {
	return len(value) + 1 + len(name) + 1 + len(strconv.Itoa(len(value))) + 1
}

// Append adds results to msg (the http runner's termination message): the
// entries, in name order, that fit the limits, and the trailer. It returns
// msg unchanged when there is nothing to say.
func Append(msg string, values map[string]string, missing []string) string {
	if len(values) == 0 && len(missing) == 0 {
		return msg
	}
	var b strings.Builder
	b.WriteString(msg)
	if msg != "" && !strings.HasSuffix(msg, "\n") {
		b.WriteString("\n")
	}
	names := make([]string, 0, len(values))
	for n := range values {
		names = append(names, n)
	}
	slices.Sort(names)
	total, n := 0, 0
	var big []string
	for _, name := range names {
		v := values[name]
		if len(v) > MaxValue || total+entrySize(name, v) > MaxBlock {
			big = append(big, name)
			continue
		}
		fmt.Fprintf(&b, "%s\n%s %d\n", v, name, len(v))
		total += entrySize(name, v)
		n++
	}
	b.WriteString(trailerLine(n, big))
	return b.String()
}

func trailerLine(n int, big []string) string {
	if len(big) == 0 {
		return trailer + strconv.Itoa(n) + "\n"
	}
	return trailer + strconv.Itoa(n) + " too-large=" + strings.Join(big, ",") + "\n"
}

// Parse finds the block at the end of a termination message: it returns
// the message before it, the results, and the names left out as too large.
// ok is false when the message has no (whole) block; then rest is msg.
func Parse(msg string) (rest string, values map[string]string, tooLarge []string, ok bool) {
	s := strings.TrimSuffix(msg, "\n")
	i := strings.LastIndexByte(s, '\n')
	last := s[i+1:]
	if !strings.HasPrefix(last, trailer) {
		return msg, nil, nil, false
	}
	count, big, _ := strings.Cut(strings.TrimPrefix(last, trailer), " ")
	n, err := strconv.Atoi(count)
	if err != nil || n < 0 || n > 64 {
		return msg, nil, nil, false
	}
	if b, found := strings.CutPrefix(big, "too-large="); found && b != "" {
		tooLarge = strings.Split(b, ",")
	}
	body := s[:i+1] // ends with the last entry's "<name> <len>\n", or is ""
	if i < 0 {
		body = ""
	}
	values = map[string]string{}
	for range n {
		h := strings.TrimSuffix(body, "\n")
		if len(h) == len(body) {
			return msg, nil, nil, false
		}
		j := strings.LastIndexByte(h, '\n')
		name, size, found := strings.Cut(h[j+1:], " ")
		length, err := strconv.Atoi(size)
		start := j - length // the value's first byte
		if !found || err != nil || length < 0 || j < 0 || start < 0 {
			return msg, nil, nil, false
		}
		values[name] = h[start:j]
		body = h[:start]
	}
	if len(values) == 0 {
		values = nil
	}
	return body, values, tooLarge, true
}
