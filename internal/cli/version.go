package cli

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/taskops/task-operator/internal/version"
)

// versionLabel is the label install.yaml and the chart put on the CRDs:
// the release that installed them.
const versionLabel = "app.kubernetes.io/version"

// The operator's Deployment, as install.yaml and the chart label it (in
// whatever namespace it was installed).
var operatorSelector = client.MatchingLabels{"app.kubernetes.io/name": "task-operator", "control-plane": "controller-manager"}

func (a *app) versionCommand() *cobra.Command {
	var clientOnly bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the plugin's version and the versions of the CRDs and operator on the cluster",
		Long: `version prints this plugin's version, then what the cluster of the
current context runs: the release that installed the Task CRD (its
app.kubernetes.io/version label) and the operator's image, found by its
Deployment's labels in any namespace. What cannot be read (no cluster, no
permission to read CRDs or list Deployments) is printed as unknown, with why.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprintf(a.out(), "kubectl-task: %s\n", version.Version)
			if clientOnly {
				return nil
			}
			c, err := a.getClients()
			if err != nil {
				fmt.Fprintf(a.out(), "CRDs: unknown (%v)\noperator: unknown (%v)\n", err, err)
				return nil
			}
			fmt.Fprintf(a.out(), "CRDs: %s\n", crdVersion(cmd.Context(), c.ctrl))
			fmt.Fprintf(a.out(), "operator: %s\n", operatorVersion(cmd.Context(), c.ctrl))
			return nil
		},
	}
	cmd.Flags().BoolVar(&clientOnly, "client", false, "print the plugin's version only")
	return cmd
}

func crdVersion(ctx context.Context, c client.Client) string {
	crd := &metav1.PartialObjectMetadata{}
	crd.SetGroupVersionKind(schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"})
	if err := c.Get(ctx, client.ObjectKey{Name: "tasks.batch.taskops.io"}, crd); err != nil {
		return fmt.Sprintf("unknown (%v)", err)
	}
	v := crd.Labels[versionLabel]
	if v == "" {
		return "unknown (the Task CRD has no " + versionLabel + " label: installed before v0.2.0 or by hand)"
	}
	return v
}

func operatorVersion(ctx context.Context, c client.Client) string {
	var list appsv1.DeploymentList
	if err := c.List(ctx, &list, operatorSelector); err != nil {
		return fmt.Sprintf("unknown (%v)", err)
	}
	var found []string
	for _, d := range list.Items {
		for _, ctr := range d.Spec.Template.Spec.Containers {
			if ctr.Name != "manager" {
				continue
			}
			tag := ctr.Image
			if i := strings.LastIndex(tag, ":"); i > strings.LastIndex(tag, "/") {
				tag = tag[i+1:]
			}
			found = append(found, fmt.Sprintf("%s (%s/%s, %d/%d replicas ready)", tag, d.Namespace, d.Name, d.Status.ReadyReplicas, d.Status.Replicas))
		}
	}
	if len(found) == 0 {
		return "not found (no Deployment labelled app.kubernetes.io/name=task-operator,control-plane=controller-manager)"
	}
	return strings.Join(found, "; ")
}
