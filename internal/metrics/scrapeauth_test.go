package metrics

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/go-logr/logr"
	authnv1 "k8s.io/api/authentication/v1"
)

// fakeReviewer knows tokens by name and who may read which path.
type fakeReviewer struct {
	users   map[string]string // token -> user
	readers map[string]bool   // user -> may get /metrics
	err     error
	calls   int
}

func (f *fakeReviewer) authenticate(_ context.Context, token string) (authnv1.UserInfo, bool, error) {
	f.calls++
	if f.err != nil {
		return authnv1.UserInfo{}, false, f.err
	}
	u, ok := f.users[token]
	return authnv1.UserInfo{Username: u}, ok, nil
}

func (f *fakeReviewer) authorize(_ context.Context, u authnv1.UserInfo, verb, path string) (bool, error) {
	return verb == "get" && path == "/metrics" && f.readers[u.Username], nil
}

func scrapeWith(t *testing.T, h http.Handler, header string) int {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	if header != "" {
		req.Header.Set("Authorization", header)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code
}

func TestScrapeAuthLetsInOnlyTokensTheAPIServerAuthorizes(t *testing.T) {
	rows := []struct {
		name, header string
		reviewErr    error
		want         int
	}{
		{"no Authorization header is 401", "", nil, http.StatusUnauthorized},
		{"a header that is not a bearer token is 401", "Basic dXNlcjpwdw==", nil, http.StatusUnauthorized},
		{"an empty bearer token is 401", "Bearer ", nil, http.StatusUnauthorized},
		{"a token the API server does not know is 401", "Bearer forged", nil, http.StatusUnauthorized},
		{"a valid token without the metrics-reader role is 403", "Bearer app", nil, http.StatusForbidden},
		{"a valid token with the role is let through", "Bearer prometheus", nil, http.StatusOK},
		{"the scheme is case-insensitive", "bearer prometheus", nil, http.StatusOK},
		{"a review the API server cannot answer is 500", "Bearer prometheus", errors.New("connection refused"), http.StatusInternalServerError},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			f := &fakeReviewer{users: map[string]string{"prometheus": "system:serviceaccount:monitoring:prometheus", "app": "system:serviceaccount:team-a:app"},
				readers: map[string]bool{"system:serviceaccount:monitoring:prometheus": true}, err: r.reviewErr}
			h, err := scrapeFilter(f, time.Now)(logr.Discard(), http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }))
			if err != nil {
				t.Fatal(err)
			}
			if got := scrapeWith(t, h, r.header); got != r.want {
				t.Errorf("status %d, want %d", got, r.want)
			}
		})
	}
}

func TestScrapeAuthKeepsAnAnswerForItsTTLAndNoErrors(t *testing.T) {
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	f := &fakeReviewer{users: map[string]string{"prometheus": "p"}, readers: map[string]bool{"p": true}}
	h, _ := scrapeFilter(f, func() time.Time { return now })(logr.Discard(), http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))

	scrapeWith(t, h, "Bearer prometheus")
	now = now.Add(decisionTTL - time.Second)
	scrapeWith(t, h, "Bearer prometheus")
	if f.calls != 1 {
		t.Errorf("%d token reviews for two scrapes within %s, want 1", f.calls, decisionTTL)
	}
	now = now.Add(time.Second)
	scrapeWith(t, h, "Bearer prometheus")
	if f.calls != 2 {
		t.Errorf("%d token reviews once the answer expired, want 2", f.calls)
	}

	f.err = errors.New("timeout")
	now = now.Add(decisionTTL)
	scrapeWith(t, h, "Bearer prometheus")
	f.err = nil
	if got := scrapeWith(t, h, "Bearer prometheus"); got != http.StatusOK || f.calls != 4 {
		t.Errorf("after a failed review: status %d with %d reviews, want 200 with 4 (a failure is not kept)", got, f.calls)
	}
}
