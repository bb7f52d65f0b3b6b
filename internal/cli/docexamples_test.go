package cli

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/testutil"
)

// docPage is the plugin's user guide, whose examples TestDocExamplesRun
// runs.
const docPage = "../../docs/kubectl-task.md"

// exampleTimeout replaces --timeout in the examples that wait: no operator
// runs here, so what they wait for never happens; the test checks that
// the command is accepted and reaches the cluster, not how long a run
// takes.
const exampleTimeout = "1s"

// TestDocExamplesRun runs every `kubectl task` command in a code block of
// docs/kubectl-task.md (```text blocks hold synopses, not commands)
// against the API server, each on a Task (or TaskQueue) of its name that
// exists: none may end in a usage error (an unknown verb or flag, a wrong
// argument) or not find what it names.
func TestDocExamplesRun(t *testing.T) {
	page, err := os.ReadFile(docPage)
	if err != nil {
		t.Fatal(err)
	}
	examples := docExamples(string(page))
	if len(examples) < 20 {
		t.Fatalf("found %d examples in %s; the parser lost some", len(examples), docPage)
	}
	dir := t.TempDir()
	manifest := "apiVersion: batch.taskops.io/v1alpha1\nkind: Task\nmetadata:\n  generateName: build-\nspec:\n  type: shell\n  shell: make test\n"
	for _, f := range []string{"task.yaml", "build.yaml"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte(manifest), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	t.Chdir(dir)
	seen := map[string]bool{}
	for _, args := range examples {
		line := strings.Join(args, " ")
		if seen[line] {
			continue
		}
		seen[line] = true
		t.Run(line, func(t *testing.T) {
			args = exampleScene(t, args)
			var out, errOut syncBuffer
			ctx, cancel := context.WithTimeout(suiteCtx, testutil.Timeout(testWait))
			defer cancel()
			code := Run(ctx, append([]string{"--kubeconfig", kubeconfig}, args...),
				genericiooptions.IOStreams{In: strings.NewReader(manifest), Out: &out, ErrOut: &errOut})
			stderr := errOut.String()
			if code == ExitError && (strings.Contains(stderr, "for usage.") || strings.Contains(stderr, "not found")) {
				t.Errorf("kubectl task %s: exit %d\n%s", strings.Join(args, " "), code, stderr)
			}
		})
	}
}

// exampleScene makes what the example names exist (its namespace, its
// Task, one-shot and succeeded, or its TaskQueue) and shortens its wait.
func exampleScene(t *testing.T, args []string) []string {
	t.Helper()
	ns, name, verb := "default", "", ""
	for i := 0; i < len(args); i++ {
		switch a := args[i]; {
		case a == "-n" || a == "--namespace":
			ns = args[i+1]
			i++
		case strings.HasPrefix(a, "-"):
			if !strings.Contains(a, "=") && !boolFlags[a] {
				i++ // its value
			}
		case verb == "":
			verb = a
		case name == "":
			name = a
		}
	}
	if err := k8s.Create(suiteCtx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	switch {
	case name == "" || verb == "completion" || verb == "version":
	case verb == "queue":
		q := &v1alpha1.TaskQueue{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: v1alpha1.TaskQueueSpec{MaxRunning: 2}}
		if err := k8s.Create(suiteCtx, q); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	default:
		if err := k8s.Create(suiteCtx, shellTask(ns, name, 0)); err != nil {
			if !apierrors.IsAlreadyExists(err) {
				t.Fatal(err)
			}
			break
		}
		setStatus(t, types.NamespacedName{Namespace: ns, Name: name}, func(task *v1alpha1.Task) { succeeded(task, 1) })
	}
	if !slices.Contains(args, "--wait") && verb != "wait" {
		return args
	}
	if i := slices.Index(args, "--timeout"); i >= 0 {
		return slices.Concat(args[:i+1], []string{exampleTimeout}, args[i+2:])
	}
	return append(args, "--timeout", exampleTimeout)
}

// boolFlags are the examples' flags that take no value.
var boolFlags = map[string]bool{"--wait": true, "--detach": true, "-A": true, "--all-namespaces": true, "-w": true, "--watch": true,
	"--attempts": true, "--no-trunc": true, "--all-containers": true, "--timestamps": true, "--client": true}

var (
	fence = regexp.MustCompile("^```(\\w*)")
	// plugin is where a command line calls the plugin: first, or after a
	// pipe, &&, exec or $(.
	plugin = regexp.MustCompile(`(?:^(?:\$ )?|\$\(|\| |&& |exec )kubectl[ -]task (.*)$`)
)

// docExamples are the argument lists of the `kubectl task` commands in the
// page's code blocks.
func docExamples(page string) [][]string {
	var out [][]string
	inBlock, lang := false, ""
	for _, line := range strings.Split(page, "\n") {
		if m := fence.FindStringSubmatch(line); m != nil {
			inBlock, lang = !inBlock, m[1]
			continue
		}
		if !inBlock || lang == "text" || lang == "" {
			continue
		}
		line = strings.TrimSpace(line)
		line = strings.TrimPrefix(line, "- ")
		if strings.HasPrefix(line, "'") && strings.HasSuffix(line, "'") { // a YAML-quoted shell line
			line = strings.Trim(line, "'")
		}
		if (lang == "console" && !strings.HasPrefix(line, "$ ")) || strings.HasPrefix(line, "#") {
			continue // a console block's output, or a comment
		}
		m := plugin.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		if args := shellWords(m[1]); len(args) > 0 {
			out = append(out, args)
		}
	}
	return out
}

// shellWords splits a command line as a POSIX shell would for these
// examples: quotes, $VAR (CI variables get a stand-in), and the command
// ends at a pipe, a redirection, a closing $( ), || or && or a comment.
func shellWords(s string) []string {
	vars := func(v string) string { return "42" }
	var words []string
	var cur strings.Builder
	inWord := false
	flush := func() {
		if inWord {
			words = append(words, cur.String())
		}
		cur.Reset()
		inWord = false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil
			}
			cur.WriteString(s[i+1 : i+1+j])
			inWord, i = true, i+1+j
		case c == '"':
			j := strings.IndexByte(s[i+1:], '"')
			if j < 0 {
				return nil
			}
			cur.WriteString(os.Expand(s[i+1:i+1+j], vars))
			inWord, i = true, i+1+j
		case c == ' ' || c == '\t':
			flush()
		case strings.ContainsRune("|>);&", rune(c)), c == '#' && !inWord:
			flush()
			return words
		case c == '$':
			j := i + 1
			for j < len(s) && (s[j] == '_' || s[j] >= 'A' && s[j] <= 'Z' || s[j] >= 'a' && s[j] <= 'z' || s[j] >= '0' && s[j] <= '9') {
				j++
			}
			cur.WriteString(vars(s[i+1 : j]))
			inWord, i = true, j-1
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	flush()
	return words
}

func TestShellWords(t *testing.T) {
	for in, want := range map[string]string{
		`run x --param date=2026-11-30 --wait -o jsonpath='{.results.rows}'`:            "run|x|--param|date=2026-11-30|--wait|-o|jsonpath={.results.rows}",
		`run deploy-db --run-now-token "pipeline-$CI_PIPELINE_ID" --wait --timeout 20m`: "run|deploy-db|--run-now-token|pipeline-42|--wait|--timeout|20m",
		`run -f task.yaml --wait -o json | jq -r .phase)`:                               "run|-f|task.yaml|--wait|-o|json",
		`cancel -n ci db-migrate || true`:                                               "cancel|-n|ci|db-migrate",
		`wait build -o jsonpath='{.message}'   # kubectl's JSONPath`:                    "wait|build|-o|jsonpath={.message}",
	} {
		if got := strings.Join(shellWords(in), "|"); got != want {
			t.Errorf("shellWords(%q) = %q, want %q", in, got, want)
		}
	}
}
