package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"sync"

	"github.com/spf13/cobra"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/taskops/task-operator/api/v1alpha1"
)

// legacyJobNameLabel is the pod label Job controllers before
// batch.kubernetes.io/job-name set.
const legacyJobNameLabel = "job-name"

type logsOptions struct {
	allContainers bool
	follow        bool
	tail          int64
	timestamps    bool
	// run and attempt pick an attempt other than the newest one.
	run     string
	attempt int32
}

func (a *app) logsCommand() *cobra.Command {
	var o logsOptions
	cmd := &cobra.Command{
		Use:   "logs NAME [--all-containers] [-f]",
		Short: "Print the logs of the pods of the Task's newest attempt",
		Long: `Print the logs of the pods of the Task's newest attempt: the Job named in
status.lastJobName, whose pods carry batch.kubernetes.io/job-name=<job>.

Without --all-containers only the Task's container (the pod's first) is
printed. With several pods (replicas > 1) or several containers each line is
prefixed with [pod] or [pod/container]. With -f the logs of all pods are
followed at once until they end or the command is interrupted.

--run and --attempt pick another attempt while its Job exists (finished
runs keep their Jobs up to the history limits): --run alone means that run's
newest attempt, --attempt alone an attempt of the current run. Their ids are
in 'kubectl task history NAME' and 'kubectl task history NAME --attempts'.`,
		Example: `  # Logs of the newest attempt of task/build
  kubectl task logs build

  # Follow them
  kubectl task logs build -f

  # Attempt 1 of the current run
  kubectl task logs build --attempt 1`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.getClients()
			if err != nil {
				return err
			}
			key := types.NamespacedName{Namespace: c.namespace, Name: args[0]}
			return a.logs(cmd.Context(), c, key, o)
		},
	}
	cmd.Flags().BoolVar(&o.allContainers, "all-containers", false, "print the logs of every container of the pods, init containers included")
	cmd.Flags().BoolVarP(&o.follow, "follow", "f", false, "follow the logs")
	cmd.Flags().Int64Var(&o.tail, "tail", -1, "lines of the end of each log to show; -1 shows all")
	cmd.Flags().BoolVar(&o.timestamps, "timestamps", false, "prefix each line with its timestamp")
	cmd.Flags().StringVar(&o.run, "run", "", "the run whose attempt to print (default: the current run)")
	cmd.Flags().Int32Var(&o.attempt, "attempt", 0, "the attempt to print (default: the run's newest)")
	return cmd
}

func (a *app) logs(ctx context.Context, c *clients, key types.NamespacedName, o logsOptions) error {
	task, err := c.getTask(ctx, key)
	if err != nil {
		return err
	}
	var pods []corev1.Pod
	var job string
	if o.run != "" || o.attempt != 0 {
		pods, job, err = podsOfAttempt(ctx, c.kube, task, o.run, o.attempt)
	} else {
		pods, job, err = podsOfNewestAttempt(ctx, c.kube, task)
	}
	if err != nil {
		return err
	}
	return streamLogs(ctx, c.kube, pods, o, a.out(), a.errOut(), job)
}

// podsOfNewestAttempt finds the pods of the Job in status.lastJobName.
func podsOfNewestAttempt(ctx context.Context, kube kubernetes.Interface, task *v1alpha1.Task) ([]corev1.Pod, string, error) {
	job := task.Status.LastJobName
	if job == "" {
		phase := string(task.Status.Phase)
		if phase == "" {
			phase = "not yet processed by the operator"
		}
		return nil, "", fmt.Errorf("task/%s has no Job yet (phase: %s)", task.Name, phase)
	}
	return podsOfJob(ctx, kube, task, job)
}

// podsOfAttempt finds the Job of attempt (0: the newest) of run ("": the
// current run) by the operator's labels, and its pods.
func podsOfAttempt(ctx context.Context, kube kubernetes.Interface, task *v1alpha1.Task, run string, attempt int32) ([]corev1.Pod, string, error) {
	if run == "" {
		run = task.Status.CurrentRun
	}
	if run == "" {
		return nil, "", fmt.Errorf("task/%s has no run yet", task.Name)
	}
	list, err := kube.BatchV1().Jobs(task.Namespace).List(ctx, metav1.ListOptions{
		LabelSelector: labels.SelectorFromSet(labels.Set{v1alpha1.LabelTask: task.Name, v1alpha1.LabelRun: run}).String(),
	})
	if err != nil {
		return nil, "", fmt.Errorf("listing the Jobs of run %s: %w", run, err)
	}
	job, newest := "", int64(0)
	for _, j := range list.Items {
		n, err := strconv.ParseInt(j.Labels[v1alpha1.LabelAttempt], 10, 32)
		if err != nil || !metav1.IsControlledBy(&j, task) {
			continue
		}
		if (attempt != 0 && int32(n) == attempt) || (attempt == 0 && n > newest) {
			job, newest = j.Name, n
		}
	}
	if job == "" {
		what := "run " + run
		if attempt != 0 {
			what = fmt.Sprintf("attempt %d of run %s", attempt, run)
		}
		return nil, "", fmt.Errorf("task/%s has no Job for %s (never started, or pruned: its record is in 'kubectl task history %s --attempts')", task.Name, what, task.Name)
	}
	return podsOfJob(ctx, kube, task, job)
}

// podsOfJob lists the pods of one of the Task's Jobs; none is an error.
func podsOfJob(ctx context.Context, kube kubernetes.Interface, task *v1alpha1.Task, job string) ([]corev1.Pod, string, error) {
	pods, err := findPods(ctx, kube, task.Namespace, job)
	if err != nil {
		return nil, job, fmt.Errorf("listing the pods of job %s: %w", job, err)
	}
	if len(pods) == 0 {
		return nil, job, fmt.Errorf("no pods found for job %s of task/%s (not created yet, or already deleted with the Job)", job, task.Name)
	}
	return pods, job, nil
}

// findPods lists the pods of a Job by its job-name label, ordered by
// completion index, then creation.
func findPods(ctx context.Context, kube kubernetes.Interface, namespace, job string) ([]corev1.Pod, error) {
	for _, label := range []string{batchv1.JobNameLabel, legacyJobNameLabel} {
		list, err := kube.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{
			LabelSelector: labels.SelectorFromSet(labels.Set{label: job}).String(),
		})
		if err != nil {
			return nil, err
		}
		if len(list.Items) > 0 {
			pods := list.Items
			sortPods(pods)
			return pods, nil
		}
	}
	return nil, nil
}

func sortPods(pods []corev1.Pod) {
	index := func(p *corev1.Pod) int {
		v, ok := p.Labels[batchv1.JobCompletionIndexAnnotation]
		if !ok {
			v = p.Annotations[batchv1.JobCompletionIndexAnnotation]
		}
		n, err := strconv.Atoi(v)
		if err != nil {
			return -1
		}
		return n
	}
	sort.SliceStable(pods, func(i, j int) bool {
		a, b := &pods[i], &pods[j]
		if ia, ib := index(a), index(b); ia != ib {
			return ia < ib
		}
		if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			return a.CreationTimestamp.Before(&b.CreationTimestamp)
		}
		return a.Name < b.Name
	})
}

// logStream is one container's log to print.
type logStream struct {
	pod, container, prefix string
}

// logStreams lists the containers to print and their line prefixes: none
// for a single stream, [pod] with several pods, [pod/container] with
// several containers in a pod.
func logStreams(pods []corev1.Pod, allContainers bool) []logStream {
	var out []logStream
	for i := range pods {
		p := &pods[i]
		var names []string
		if allContainers {
			for _, c := range p.Spec.InitContainers {
				names = append(names, c.Name)
			}
			for _, c := range p.Spec.Containers {
				names = append(names, c.Name)
			}
		} else if len(p.Spec.Containers) > 0 {
			names = []string{p.Spec.Containers[0].Name}
		}
		for _, n := range names {
			s := logStream{pod: p.Name, container: n}
			switch {
			case len(names) > 1:
				s.prefix = "[" + p.Name + "/" + n + "] "
			case len(pods) > 1:
				s.prefix = "[" + p.Name + "] "
			}
			out = append(out, s)
		}
	}
	return out
}

// streamLogs prints the logs of the pods: one after the other, or all at
// once when following. A container whose log cannot be read is reported on
// stderr and makes the command end in ExitError after the others printed.
func streamLogs(ctx context.Context, kube kubernetes.Interface, pods []corev1.Pod, o logsOptions, stdout, stderr io.Writer, job string) error {
	streams := logStreams(pods, o.allContainers)
	if len(streams) == 0 {
		return fmt.Errorf("the pods of job %s have no containers", job)
	}
	for i := range pods {
		if pods[i].Status.Phase == corev1.PodPending {
			fmt.Fprintf(stderr, "note: pod/%s is Pending%s; its log may be empty\n", pods[i].Name, waitingReason(&pods[i]))
		}
	}
	out := &lockedWriter{w: stdout}
	var (
		mu     sync.Mutex
		failed int
	)
	fail := func(s logStream, err error) {
		mu.Lock()
		defer mu.Unlock()
		failed++
		fmt.Fprintf(stderr, "error: pod/%s container %s: %v\n", s.pod, s.container, err)
	}
	one := func(s logStream, namespace string) {
		opts := &corev1.PodLogOptions{Container: s.container, Follow: o.follow, Timestamps: o.timestamps}
		if o.tail >= 0 {
			opts.TailLines = &o.tail
		}
		rc, err := kube.CoreV1().Pods(namespace).GetLogs(s.pod, opts).Stream(ctx)
		if err != nil {
			fail(s, err)
			return
		}
		defer func() { _ = rc.Close() }()
		if err := copyLines(out, rc, s.prefix); err != nil && ctx.Err() == nil {
			fail(s, err)
		}
	}
	ns := pods[0].Namespace
	if o.follow && len(streams) > 1 {
		var wg sync.WaitGroup
		for _, s := range streams {
			wg.Add(1)
			go func() {
				defer wg.Done()
				one(s, ns)
			}()
		}
		wg.Wait()
	} else {
		for _, s := range streams {
			one(s, ns)
			if ctx.Err() != nil {
				break
			}
		}
	}
	if ctx.Err() != nil && !errors.Is(ctx.Err(), context.Canceled) {
		return ctx.Err()
	}
	if failed > 0 {
		return exitCode(ExitError)
	}
	return nil
}

// waitingReason is why a pod's first waiting container waits, if known.
func waitingReason(p *corev1.Pod) string {
	for _, cs := range append(append([]corev1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
		if w := cs.State.Waiting; w != nil && w.Reason != "" {
			return " (" + cs.Name + ": " + w.Reason + ")"
		}
	}
	return ""
}

// lockedWriter writes whole lines from several goroutines.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) writeLine(prefix, line string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, err := io.WriteString(l.w, prefix+line)
	return err
}

// copyLines copies r to w line by line, each prefixed; a last line without
// a newline gets one.
func copyLines(w *lockedWriter, r io.Reader, prefix string) error {
	br := bufio.NewReader(r)
	for {
		line, err := br.ReadString('\n')
		if len(line) > 0 {
			if line[len(line)-1] != '\n' {
				line += "\n"
			}
			if werr := w.writeLine(prefix, line); werr != nil {
				return werr
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}
