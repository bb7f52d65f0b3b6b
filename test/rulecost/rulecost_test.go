package rulecost

import (
	"context"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/testutil"
	"github.com/taskops/task-operator/test/harness"
)

// The load of a round: writers goroutines, each creating creates Tasks
// (one-shot shell Tasks, as a burst makes) and then patching the status
// of one of them patches times (the patch a run's record would make:
// attempts and the last error). Rounds alternate between the two API
// servers, so a machine that slows down during the run slows both.
const (
	writers = 16
	creates = 25
	patches = 200
)

// rounds: one round is about 30 s (both API servers). Their spread is
// wide (a tenth either way on 2 cores): read the median, and more rounds
// for a small difference.
var rounds = flag.Int("rounds", 5, "rounds, each on both API servers in turn")

// BenchmarkRulesPerStatusWrite prints, for the Task CRD as shipped and
// without its rules (the baseline), the API server's CPU per Task create
// and per status patch (medians of the rounds) and their ratios; it
// reports the status patch's. Run it once (make bench-rules):
// go test ./test/rulecost -run '^$' -bench . -benchtime 1x.
func BenchmarkRulesPerStatusWrite(b *testing.B) {
	shipped := filepath.Join(testutil.RepoRoot(), "config", "crd", "bases")
	bare, err := crdsWithoutRules(shipped, b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; i < b.N; i++ {
		var without, with costs
		for range *rounds {
			for _, v := range []struct {
				dir string
				out *costs
			}{{bare, &without}, {shipped, &with}} {
				create, patch, err := cpuPerWrite(v.dir)
				if err != nil {
					b.Fatal(err)
				}
				v.out.create, v.out.patch = append(v.out.create, create), append(v.out.patch, patch)
			}
		}
		for _, w := range []struct {
			name          string
			with, without []float64
		}{{"create", with.create, without.create}, {"status patch", with.patch, without.patch}} {
			a, z := harness.Median(w.with), harness.Median(w.without)
			fmt.Printf("API server CPU per Task %s: %.3f ms with the CRD's rules %s, %.3f ms without them %s: %.2f x\n",
				w.name, a, ms(w.with), z, ms(w.without), a/z)
		}
		b.ReportMetric(harness.Median(with.patch), "apiserver-ms/patch")
		b.ReportMetric(harness.Median(with.patch)/harness.Median(without.patch), "x-without-rules")
	}
}

// costs are a CRD's rounds: API server CPU per write, milliseconds.
type costs struct{ create, patch []float64 }

func ms(v []float64) string {
	parts := make([]string, len(v))
	for i, x := range v {
		parts[i] = fmt.Sprintf("%.2f", x)
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// cpuPerWrite starts an API server with the CRDs in dir, creates writers
// x creates Tasks, then sends writers x patches status patches: the API
// server's CPU (its process_cpu_seconds_total) per create and per patch,
// in milliseconds.
func cpuPerWrite(dir string) (create, patch float64, err error) {
	env, err := testutil.NewEnv()
	if err != nil {
		return 0, 0, err
	}
	env.CRDDirectoryPaths = []string{dir}
	cfg, stop, err := testutil.StartEnv(env)
	if err != nil {
		return 0, 0, err
	}
	defer stop()
	cfg.QPS, cfg.Burst = -1, -1 // no client-side limit: the API server is measured
	c, err := client.New(cfg, client.Options{Scheme: testutil.Scheme()})
	if err != nil {
		return 0, 0, err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return 0, 0, err
	}
	ctx := context.Background()
	if create, err = perWrite(ctx, cs, writers*creates, func(w int) error {
		for k := range creates {
			t := &v1alpha1.Task{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: fmt.Sprintf("t%02d-%02d", w, k)},
				Spec: v1alpha1.TaskSpec{Type: v1alpha1.TaskTypeShell, Shell: "echo hello"}}
			if err := c.Create(ctx, t); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		return 0, 0, err
	}
	patch, err = perWrite(ctx, cs, writers*patches, func(w int) error {
		t := &v1alpha1.Task{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: fmt.Sprintf("t%02d-00", w)}}
		for k := range patches {
			p := fmt.Sprintf(`{"status":{"attempts":%d,"lastError":"attempt %d failed"}}`, k+1, k+1)
			if err := c.Status().Patch(ctx, t, client.RawPatch(types.MergePatchType, []byte(p))); err != nil {
				return err
			}
		}
		return nil
	})
	return create, patch, err
}

// perWrite runs write in writers goroutines and returns the API server's
// CPU per write, in milliseconds (n writes in all).
func perWrite(ctx context.Context, cs kubernetes.Interface, n int, write func(w int) error) (float64, error) {
	before, err := apiserverCPU(ctx, cs)
	if err != nil {
		return 0, err
	}
	errs := make(chan error, writers)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			if err := write(w); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return 0, err
	}
	after, err := apiserverCPU(ctx, cs)
	if err != nil {
		return 0, err
	}
	return (after - before) * 1000 / float64(n), nil
}

// apiserverCPU reads the API server's process_cpu_seconds_total.
func apiserverCPU(ctx context.Context, cs kubernetes.Interface) (float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	m, err := harness.APIServerMetrics(ctx, cs.CoreV1().RESTClient())
	if err != nil {
		return 0, err
	}
	v := m.Value("process_cpu_seconds_total")
	if math.IsNaN(v) {
		return 0, fmt.Errorf("no process_cpu_seconds_total in the API server's /metrics")
	}
	return v, nil
}

// crdsWithoutRules writes the CRDs of src to dir with every
// x-kubernetes-validations removed.
func crdsWithoutRules(src, dir string) (string, error) {
	entries, err := os.ReadDir(src)
	if err != nil {
		return "", err
	}
	for _, e := range entries {
		raw, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			return "", err
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.Unmarshal(raw, &crd); err != nil {
			return "", fmt.Errorf("%s: %w", e.Name(), err)
		}
		for i := range crd.Spec.Versions {
			if s := crd.Spec.Versions[i].Schema; s != nil && s.OpenAPIV3Schema != nil {
				stripRules(s.OpenAPIV3Schema)
			}
		}
		out, err := yaml.Marshal(&crd)
		if err != nil {
			return "", err
		}
		if err := os.WriteFile(filepath.Join(dir, e.Name()), out, 0o644); err != nil {
			return "", err
		}
	}
	return dir, nil
}

func stripRules(s *apiextensionsv1.JSONSchemaProps) {
	s.XValidations = nil
	for k, p := range s.Properties {
		stripRules(&p)
		s.Properties[k] = p
	}
	if s.Items != nil && s.Items.Schema != nil {
		stripRules(s.Items.Schema)
	}
	if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
		stripRules(s.AdditionalProperties.Schema)
	}
}
