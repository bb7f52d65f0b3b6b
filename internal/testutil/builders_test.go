package testutil

import "testing"

func TestRequestsAndLimitsAddToTheirOwnList(t *testing.T) {
	task := NewTask("ns", "t", Requests("cpu", "1"), Limits("memory", "16Mi"), Requests("memory", "8Mi"))
	r := task.Spec.Resources
	if r.Requests.Cpu().String() != "1" || r.Requests.Memory().String() != "8Mi" || r.Limits.Memory().String() != "16Mi" || len(r.Limits) != 1 {
		t.Fatalf("resources %+v", r)
	}
}
