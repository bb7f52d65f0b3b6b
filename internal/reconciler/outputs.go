package reconciler

import (
	"context"

	"github.com/taskops/task-operator/internal/runs"
	"github.com/taskops/task-operator/internal/status"
)

// readOutputs is stage 4: what the pods of finished attempts said, for the
// status messages, read only for the attempts whose outcome the status
// does not have yet (status.OutputsToRead) and never again once written.
// An attempt whose Job kept its output (deadline, see deadlineOutput) is
// not read again either: its pods are gone.
func (p *pass) readOutputs(ctx context.Context) error {
	p.outputs = map[string]status.Output{}
	for _, name := range status.OutputsToRead(p.task, p.runs, p.now) {
		if out := capturedOutput(p.runs, name); out != "" {
			p.outputs[name] = status.Output{Text: out}
			continue
		}
		if a := runs.FindAttempt(p.runs, name); a != nil && a.Remote {
			// Its pods ran on a worker cluster (multikueue.go).
			out, err := p.remoteOutput(ctx, a)
			if err != nil {
				return err
			}
			p.outputs[name] = out
			continue
		}
		pods, err := p.attemptPods(ctx, name)
		if err != nil {
			return err
		}
		if out := podOutput(pods); out.Text != "" || out.ExitCode != nil {
			p.outputs[name] = out
		}
	}
	return nil
}

// capturedOutput is the output kept on the Job of an attempt, or "".
func capturedOutput(rs []runs.Run, jobName string) string {
	if a := runs.FindAttempt(rs, jobName); a != nil {
		return a.Output
	}
	return ""
}
