package runs

import (
	"encoding/json"

	"github.com/taskops/task-operator/api/v1alpha1"
)

// MaxLostWorkers is how many lost workers an attempt keeps, the newest.
const MaxLostWorkers = 5

// EncodeLostWorkers is the annotation value of an attempt's lost workers,
// the newest MaxLostWorkers.
func EncodeLostWorkers(lost []v1alpha1.LostWorker) string {
	if len(lost) > MaxLostWorkers {
		lost = lost[len(lost)-MaxLostWorkers:]
	}
	b, _ := json.Marshal(lost) // plain strings and times: cannot fail
	return string(b)
}

// DecodeLostWorkers reads the annotation; a value that does not parse
// (edited by hand) is none.
func DecodeLostWorkers(v string) []v1alpha1.LostWorker {
	if v == "" {
		return nil
	}
	var lost []v1alpha1.LostWorker
	if json.Unmarshal([]byte(v), &lost) != nil {
		return nil
	}
	return lost
}
