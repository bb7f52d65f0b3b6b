package results

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestAppendAndParse(t *testing.T) {
	hostile := "line1\nline2\n9 99\ntask-results-v1 3\n"
	for _, tc := range []struct {
		name    string
		msg     string
		values  map[string]string
		missing []string
		want    map[string]string
		big     []string
	}{
		{name: "values after a summary come back, the summary too", msg: "HTTP 200 OK in 12ms\n", values: map[string]string{"id": "42", "etag": `"abc"`},
			want: map[string]string{"id": "42", "etag": `"abc"`}},
		{name: "a value that looks like framing comes back verbatim", values: map[string]string{"x": hostile, "y": ""},
			want: map[string]string{"x": hostile, "y": ""}},
		{name: "a value over 1 KiB is left out and named", values: map[string]string{"a": "ok", "b": strings.Repeat("x", 1025)},
			want: map[string]string{"a": "ok"}, big: []string{"b"}},
		{name: "values over the block are left out from the first that does not fit", values: map[string]string{
			"a": strings.Repeat("a", 1024), "b": strings.Repeat("b", 1024), "c": strings.Repeat("c", 1024), "d": strings.Repeat("d", 1024)},
			want: map[string]string{"a": strings.Repeat("a", 1024), "b": strings.Repeat("b", 1024), "c": strings.Repeat("c", 1024)}, big: []string{"d"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msg := Append(tc.msg, tc.values, tc.missing)
			if len(msg)-len(tc.msg) > 4096 {
				t.Errorf("the block is %d bytes, over the kubelet's 4096", len(msg)-len(tc.msg))
			}
			rest, got, big, ok := Parse(msg)
			if !ok {
				t.Fatalf("no block found in %q", msg)
			}
			if rest != tc.msg {
				t.Errorf("rest %q, want %q", rest, tc.msg)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("values (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tc.big, big); d != "" {
				t.Errorf("too large (-want +got):\n%s", d)
			}
		})
	}
	for _, msg := range []string{"", "plain output\n", "task-results-v1 2\n", "x\ntask-results-v1 1\n", "v\nname 5\ntask-results-v1 1\n"} {
		if rest, _, _, ok := Parse(msg); ok || rest != msg {
			t.Errorf("Parse(%q) = ok %v, rest %q: want no block, the message unchanged", msg, ok, rest)
		}
	}
}

// The wrapper, run by a real /bin/sh: the script's exit code, its results
// in the termination message, nothing when it failed without results.
func TestTheShellWrapper(t *testing.T) {
	for _, tc := range []struct {
		name    string
		script  string
		results []string
		code    int
		want    map[string]string
		big     []string
		noMsg   bool
	}{
		{name: "results written by a succeeding script", script: `printf 42 >"$TASK_RESULTS_DIR/rows"; printf 'a\nb' >"$TASK_RESULTS_DIR/url"`,
			results: []string{"rows", "url", "absent"}, want: map[string]string{"rows": "42", "url": "a\nb"}},
		{name: "a failing script keeps its results and its exit code", script: `echo half >"$TASK_RESULTS_DIR/done"; exit 3`,
			results: []string{"done"}, code: 3, want: map[string]string{"done": "half\n"}},
		{name: "a failing script without results leaves the message to the log", script: `echo oops; exit 4`, results: []string{"done"}, code: 4, noMsg: true},
		{name: "a value over 1 KiB is named, not kept", script: `head -c 1025 /dev/zero | tr '\0' x >"$TASK_RESULTS_DIR/big"; echo -n ok >"$TASK_RESULTS_DIR/small"`,
			results: []string{"big", "small"}, want: map[string]string{"small": "ok"}, big: []string{"big"}},
		{name: "the script is an argument, never shell text of the wrapper", script: `echo -n "$0|$#" >"$TASK_RESULTS_DIR/args"`,
			results: []string{"args"}, want: map[string]string{"args": "/bin/sh|0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			msgFile := filepath.Join(dir, "termination-log")
			wrapper := strings.ReplaceAll(Wrapper, "/dev/termination-log", msgFile)
			cmd := exec.Command("/bin/sh", append([]string{"-c", wrapper, "task-results", tc.script}, tc.results...)...)
			cmd.Env = append(os.Environ(), DirEnv+"="+dir)
			err := cmd.Run()
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != tc.code {
				t.Errorf("exit code %d, want %d", code, tc.code)
			}
			b, err := os.ReadFile(msgFile)
			if tc.noMsg {
				if err == nil {
					t.Errorf("a termination message was written: %q", b)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			_, got, big, ok := Parse(string(b))
			if !ok {
				t.Fatalf("no block in %q", b)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("values (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tc.big, big); d != "" {
				t.Errorf("too large (-want +got):\n%s", d)
			}
		})
	}
}

// SIGTERM reaches a script that traps it, which can still hand back a
// result while it cleans up.
func TestTheShellWrapperHandsSIGTERMOn(t *testing.T) {
	dir := t.TempDir()
	msgFile := filepath.Join(dir, "termination-log")
	wrapper := strings.ReplaceAll(Wrapper, "/dev/termination-log", msgFile)
	script := `trap 'echo -n cleaned >"$TASK_RESULTS_DIR/state"; exit 7' TERM; touch "$TASK_RESULTS_DIR/ready"; while :; do sleep 0.1; done`
	cmd := exec.Command("/bin/sh", "-c", wrapper, "task-results", script, "state")
	cmd.Env = append(os.Environ(), DirEnv+"="+dir)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(filepath.Join(dir, "ready")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the script did not start within 10s")
		}
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	err := cmd.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 7 {
		t.Fatalf("the wrapper ended with %v, want the script's exit code 7", err)
	}
	b, _ := os.ReadFile(msgFile)
	if _, got, _, _ := Parse(string(b)); got["state"] != "cleaned" {
		t.Errorf("results %v, want state=cleaned from the script's SIGTERM trap", got)
	}
}
