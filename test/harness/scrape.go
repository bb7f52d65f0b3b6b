package harness

import (
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Scrape GETs a metrics endpoint as an in-cluster Prometheus does: token
// as its bearer ("" for none) and, over HTTPS, the endpoint's self-signed
// certificate trusted (the shipped ServiceMonitor's insecureSkipVerify).
// It returns the status and body; 0 and the error when nothing answered.
func Scrape(url, token string) (int, string) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return 0, err.Error()
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	cl := http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} // the endpoint's self-signed certificate
	resp, err := cl.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// MetricsTokens makes, in the existing namespace ns, a ServiceAccount
// "prometheus" bound to the ClusterRole role (the release's
// metrics-reader) and one "app" without it, and returns a token of each.
// The binding goes when the test ends.
func MetricsTokens(ctx context.Context, t testing.TB, c client.Client, ns, role string) (reader, other string) {
	t.Helper()
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: ns + "-metrics-reader"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "prometheus"}}}
	for _, o := range []client.Object{
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "prometheus"}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app"}},
		binding,
	} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatalf("creating %T %s: %v", o, o.GetName(), err)
		}
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), binding) })
	token := func(name string) string {
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		tr := &authnv1.TokenRequest{}
		if err := c.SubResource("token").Create(ctx, sa, tr); err != nil {
			t.Fatalf("a token for %s/%s: %v", ns, name, err)
		}
		return tr.Status.Token
	}
	return token("prometheus"), token("app")
}
