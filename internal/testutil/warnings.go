package testutil

import (
	"context"
	"sync"

	"k8s.io/client-go/rest"
)

// Warnings collects the Warning headers the API server sends a client
// (Pod Security's warn mode speaks through them). Give it to a rest.Config
// with WarnOn.
type Warnings struct {
	mu   sync.Mutex
	list []string
}

// WarnOn returns a copy of cfg whose clients report their warnings to a new
// Warnings.
func WarnOn(cfg *rest.Config) (*rest.Config, *Warnings) {
	w := &Warnings{}
	c := rest.CopyConfig(cfg)
	c.WarningHandler, c.WarningHandlerWithContext = nil, w
	return c, w
}

// HandleWarningHeaderWithContext implements rest.WarningHandlerWithContext.
func (w *Warnings) HandleWarningHeaderWithContext(_ context.Context, _ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.list = append(w.list, text)
}

// Take returns the warnings so far and forgets them.
func (w *Warnings) Take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.list
	w.list = nil
	return out
}
