package metrics

import (
	"context"
	"crypto/sha256"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// The secure metrics endpoint lets in a scrape only when the API server
// says its bearer token is valid (a TokenReview) and its owner may GET the
// path (a SubjectAccessReview on the non-resource URL /metrics, which the
// metrics-reader ClusterRole grants): the rule of kubebuilder's scaffold and
// of kube-rbac-proxy. No token or an invalid one is 401, a valid one without
// the permission 403, a review the API server could not answer 500.
//
// It is written here rather than taken from controller-runtime's
// filters.WithAuthenticationAndAuthorization because that one brings
// k8s.io/apiserver, which nearly doubles the manager's binary and image, for
// two API calls.

// reviewer asks the API server the two questions; tests answer them.
type reviewer interface {
	authenticate(ctx context.Context, token string) (authnv1.UserInfo, bool, error)
	authorize(ctx context.Context, u authnv1.UserInfo, verb, path string) (bool, error)
}

// decisionTTL is how long a token's answer is kept, so a Prometheus that
// scrapes every 30 s costs two reviews a minute, not two per scrape. A
// revoked binding is honoured within it (the API server's own token webhook
// cache keeps answers for 2 minutes).
const decisionTTL = time.Minute

// ScrapeAuth is a metricsserver.FilterProvider: every scrape is
// authenticated and authorized by the API server config points at.
func ScrapeAuth(config *rest.Config, httpClient *http.Client) (metricsserver.Filter, error) {
	cs, err := kubernetes.NewForConfigAndClient(config, httpClient)
	if err != nil {
		return nil, err
	}
	return scrapeFilter(apiReviewer{cs}, time.Now), nil
}

func scrapeFilter(r reviewer, now func() time.Time) metricsserver.Filter {
	cache := &decisions{m: map[[32]byte]decision{}}
	return func(log logr.Logger, next http.Handler) (http.Handler, error) {
		return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			token, ok := bearer(req)
			if !ok {
				http.Error(w, "Unauthorized: a bearer token is required", http.StatusUnauthorized)
				return
			}
			verb := strings.ToLower(req.Method)
			key := sha256.Sum256([]byte(verb + " " + req.URL.Path + " " + token))
			code, ok := cache.get(key, now())
			if !ok {
				code = review(req.Context(), log, r, token, verb, req.URL.Path)
				if code != http.StatusInternalServerError {
					cache.put(key, code, now())
				}
			}
			switch code {
			case http.StatusOK:
				next.ServeHTTP(w, req)
			case http.StatusUnauthorized:
				http.Error(w, "Unauthorized: the API server does not accept this token", code)
			case http.StatusForbidden:
				http.Error(w, "Forbidden: the token's owner may not "+verb+" "+req.URL.Path+" (bind the metrics-reader ClusterRole)", code)
			default:
				http.Error(w, "the API server could not review this scrape", code)
			}
		}), nil
	}
}

// review is the HTTP status the two reviews lead to.
func review(ctx context.Context, log logr.Logger, r reviewer, token, verb, path string) int {
	u, ok, err := r.authenticate(ctx, token)
	if err != nil {
		log.Error(err, "reviewing a metrics scraper's token")
		return http.StatusInternalServerError
	}
	if !ok {
		return http.StatusUnauthorized
	}
	allowed, err := r.authorize(ctx, u, verb, path)
	if err != nil {
		log.Error(err, "reviewing a metrics scraper's access", "user", u.Username)
		return http.StatusInternalServerError
	}
	if !allowed {
		return http.StatusForbidden
	}
	return http.StatusOK
}

func bearer(req *http.Request) (string, bool) {
	h := req.Header.Get("Authorization")
	const prefix = "bearer "
	if len(h) <= len(prefix) || !strings.EqualFold(h[:len(prefix)], prefix) {
		return "", false
	}
	t := strings.TrimSpace(h[len(prefix):])
	return t, t != ""
}

type decision struct {
	code    int
	expires time.Time
}

// decisions keeps each token's answer for decisionTTL, keyed by a hash so
// no token is held in memory.
type decisions struct {
	mu sync.Mutex
	m  map[[32]byte]decision
}

func (d *decisions) get(k [32]byte, now time.Time) (int, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	e, ok := d.m[k]
	if !ok || !now.Before(e.expires) {
		return 0, false
	}
	return e.code, true
}

func (d *decisions) put(k [32]byte, code int, now time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for key, e := range d.m { // few scrapers: sweeping on write keeps it small
		if !now.Before(e.expires) {
			delete(d.m, key)
		}
	}
	d.m[k] = decision{code: code, expires: now.Add(decisionTTL)}
}

type apiReviewer struct{ cs kubernetes.Interface }

func (a apiReviewer) authenticate(ctx context.Context, token string) (authnv1.UserInfo, bool, error) {
	tr, err := a.cs.AuthenticationV1().TokenReviews().Create(ctx,
		&authnv1.TokenReview{Spec: authnv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	if err != nil {
		return authnv1.UserInfo{}, false, err
	}
	return tr.Status.User, tr.Status.Authenticated, nil
}

func (a apiReviewer) authorize(ctx context.Context, u authnv1.UserInfo, verb, path string) (bool, error) {
	extra := map[string]authzv1.ExtraValue{}
	for k, v := range u.Extra {
		extra[k] = authzv1.ExtraValue(v)
	}
	sar, err := a.cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authzv1.SubjectAccessReview{
		Spec: authzv1.SubjectAccessReviewSpec{
			User: u.Username, Groups: u.Groups, UID: u.UID, Extra: extra,
			NonResourceAttributes: &authzv1.NonResourceAttributes{Path: path, Verb: verb},
		}}, metav1.CreateOptions{})
	if err != nil {
		return false, err
	}
	return sar.Status.Allowed, nil
}
