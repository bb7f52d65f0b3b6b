package runs

import "github.com/taskops/task-operator/api/v1alpha1"

// MaxLostWorkers is how many lost workers an attempt keeps, the newest.
const MaxLostWorkers = 5

// EncodeLostWorkers is the annotation value of an attempt's lost workers
// (v1alpha1.AnnotationLostWorkers), the newest MaxLostWorkers.
func EncodeLostWorkers(lost []v1alpha1.LostWorker) string {
	if len(lost) > MaxLostWorkers {
		lost = lost[len(lost)-MaxLostWorkers:]
	}
	return encodeList(lost)
}

// DecodeLostWorkers reads the annotation; a value that does not parse
// (edited by hand) is none.
func DecodeLostWorkers(v string) []v1alpha1.LostWorker { return decodeList[v1alpha1.LostWorker](v) }
