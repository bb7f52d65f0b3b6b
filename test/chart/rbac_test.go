package chart

import (
	"fmt"
	"slices"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// The default install reads no ConfigMap and no Secret cluster-wide: they
// hold every tenant's configuration and credentials. Notifications read
// Secrets through a Job that mounts them; spec.skipDatesFrom is read only
// where a namespace grants it (a RoleBinding). Checked on what users
// install: config/default (install.yaml is rendered from it) and the
// chart's defaults.
func TestTheInstallReadsNoConfigMapOrSecretClusterWide(t *testing.T) {
	for name, objs := range map[string]map[string]*unstructured.Unstructured{
		"config/default (install.yaml)": kustomizeDefault(t),
		"the chart's defaults":          render(t, "task-operator", nil),
	} {
		for _, o := range objs {
			if o.GetKind() != "ClusterRole" {
				continue
			}
			var role rbacv1.ClusterRole
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &role); err != nil {
				t.Fatalf("%s: ClusterRole %s: %v", name, o.GetName(), err)
			}
			for _, rule := range role.Rules {
				if bad := coreReadOf(rule, "configmaps", "secrets"); bad != "" {
					t.Errorf("%s: ClusterRole %s grants %v on %s cluster-wide", name, role.Name, rule.Verbs, bad)
				}
			}
		}
	}
}

// coreReadOf names the first of resources (core API group) that rule
// covers, wildcards included, or "".
func coreReadOf(rule rbacv1.PolicyRule, resources ...string) string {
	if !slices.Contains(rule.APIGroups, "") && !slices.Contains(rule.APIGroups, "*") {
		return ""
	}
	for _, r := range resources {
		if slices.Contains(rule.Resources, r) || slices.Contains(rule.Resources, "*") {
			return fmt.Sprintf("%q", r)
		}
	}
	return ""
}
