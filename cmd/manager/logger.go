package main

import (
	"fmt"
	"slices"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// newLogger builds the operator's logger: JSON (or console) at level,
// unsampled, its fields encoded only when it writes (deferredWith).
func newLogger(level, format string) (*zap.Logger, error) {
	var lvl zapcore.Level
	if err := lvl.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	cfg := zap.NewProductionConfig()
	if format == "console" {
		cfg = zap.NewDevelopmentConfig()
	} else if format != "json" {
		return nil, fmt.Errorf("--log-format must be json or console, not %q", format)
	}
	cfg.Level = zap.NewAtomicLevelAt(lvl)
	cfg.Sampling = nil
	return cfg.Build(zap.WrapCore(func(c zapcore.Core) zapcore.Core {
		return deferredWith{Core: c, base: c}
	}))
}

// deferredWith is a core whose With keeps the fields and encodes them only
// when the logger writes. controller-runtime gives every reconcile a logger
// of its own (controller, namespace, name, reconcileID), and zap's With
// encodes those fields into a new buffer at once: garbage for every pass,
// though a pass almost never logs (docs/performance-history.md, "Lazy
// loggers and the Jobs read in place").
// Each With starts one zapcore.NewLazyWith over the base core with all
// the fields so far, so loggers made from loggers stay lazy too (a lazy
// core's own With would encode its parent's).
// The values are the same either way: controller-runtime's are strings and
// object references, copied when added.
type deferredWith struct {
	zapcore.Core                 // writes: the base core with fields, made on its first use
	base         zapcore.Core    // the core without fields
	fields       []zapcore.Field // every field added so far
}

func (c deferredWith) With(fields []zapcore.Field) zapcore.Core {
	if len(fields) == 0 {
		return c
	}
	all := append(slices.Clip(c.fields), fields...)
	return deferredWith{Core: zapcore.NewLazyWith(c.base, all), base: c.base, fields: all}
}
