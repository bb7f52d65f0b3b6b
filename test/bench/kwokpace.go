package main

import (
	"fmt"
	"io"
	"math"
	"strings"
	"time"
)

// The simulated kubelet's pace. kwok plays the node's kubelet: it marks a
// bound pod running, then finished. When it falls behind, every Job waits
// for it, and a completion-bound figure (a queue's throughput, its
// admission latency) follows kwok rather than the operator. kwok can fall
// behind by seconds for minutes at a time while the scheduler and the Job
// controller keep their pace (docs/performance-history.md, the scale
// session of 2026-12-07 20:10). The audit log shows
// it: for each pod, when its binding was written and when kwok first
// wrote its status. A refused status write is kwok applying a stage to a
// stale copy of a pod (its watch behind), which the API server rejects.

// kwokPods holds, for the pods of one namespace, the audit log's binding
// time and kwok's first status write, and when kwok's refused writes came.
type kwokPods struct {
	bound   map[string]time.Time // pod name -> its binding written
	first   map[string]time.Time // pod name -> kwok's first status write received
	refused []time.Time
}

// kwokPace is kwok's pace over the pods bound in one window.
type kwokPace struct {
	// lag: per pod bound in the window, seconds from its binding to
	// kwok's first status write.
	lag []float64
	// refused: kwok's status writes received in the window that the API
	// server refused.
	refused int
	known   bool
}

const kwokUserAgentPrefix = "kwok/"

func readKwokPods(r io.Reader, namespace string) (kwokPods, error) {
	k := kwokPods{bound: map[string]time.Time{}, first: map[string]time.Time{}}
	err := eachAuditEvent(r, func(e *auditEvent) {
		o := e.ObjectRef
		if e.Stage != "ResponseComplete" || o == nil || o.Resource != "pods" || o.Namespace != namespace || e.ResponseStatus == nil {
			return
		}
		switch {
		case o.Subresource == "binding" && e.Verb == "create" && e.ResponseStatus.Code == 201:
			k.bound[o.Name] = e.StageTimestamp
		case o.Subresource == "status" && strings.HasPrefix(e.UserAgent, kwokUserAgentPrefix):
			// The log is in order of completion, not of arrival.
			if t, ok := k.first[o.Name]; !ok || e.RequestReceived.Before(t) {
				k.first[o.Name] = e.RequestReceived
			}
			if e.ResponseStatus.Code >= 400 {
				k.refused = append(k.refused, e.RequestReceived)
			}
		}
	})
	return k, err
}

func readKwokPodsFile(path, namespace string) (k kwokPods, err error) {
	return k, readAuditFile(path, func(r io.Reader) error {
		k, err = readKwokPods(r, namespace)
		return err
	})
}

// pace is kwok's pace over the pods bound in [from, to).
func (k kwokPods) pace(from, to time.Time) kwokPace {
	p := kwokPace{known: true}
	for pod, b := range k.bound {
		f, ok := k.first[pod]
		if !ok || b.Before(from) || !b.Before(to) {
			continue
		}
		p.lag = append(p.lag, f.Sub(b).Seconds())
	}
	for _, t := range k.refused {
		if !t.Before(from) && t.Before(to) {
			p.refused++
		}
	}
	return p
}

// p50, p99: the lag's percentiles (NaN without a pod); refusedOr: the
// refused writes. Each NaN when not known.
func (p kwokPace) p50() float64 { return p.or(percentile(p.lag, 50)) }
func (p kwokPace) p99() float64 { return p.or(percentile(p.lag, 99)) }
func (p kwokPace) refusedOr() float64 {
	return p.or(float64(p.refused))
}
func (p kwokPace) or(x float64) float64 {
	if !p.known {
		return math.NaN()
	}
	return x
}

func (p kwokPace) String() string {
	if !p.known {
		return "not known (no audit log)"
	}
	return fmt.Sprintf("%d pods bound: to kwok's first status write p50 %.2f s p99 %.2f s; %d of its status writes refused", len(p.lag), p.p50(), p.p99(), p.refused)
}

// kwokRowName names kwok's pace in the report.
const kwokRowName = "the simulated kubelet (kwok): a pod bound to kwok's first status write, p50 / p99; its status writes refused"

// kwokRowBy is a report row's value: over the repeats (collect), the lag's
// p50 / p99 and the refused writes of the pace pick chooses.
func kwokRowBy[R any](collect func(func(R) float64) []float64, pick func(R) kwokPace) string {
	p50 := collect(func(r R) float64 { return pick(r).p50() })
	p99 := collect(func(r R) float64 { return pick(r).p99() })
	refused := collect(func(r R) float64 { return pick(r).refusedOr() })
	return spread(p50, "s") + " / " + spread(p99, "s") + "; refused " + spread(refused, "")
}
