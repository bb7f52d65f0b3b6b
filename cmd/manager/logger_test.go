package main

import (
	"bytes"
	"encoding/json"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// countingEncoder counts the fields a core's With encodes.
type countingEncoder struct {
	zapcore.Encoder
	added *int
}

func (e countingEncoder) Clone() zapcore.Encoder {
	return countingEncoder{Encoder: e.Encoder.Clone(), added: e.added}
}

func (e countingEncoder) AddString(k, v string) {
	*e.added++
	e.Encoder.AddString(k, v)
}

// A logger made from loggers (as controller-runtime makes one per
// reconcile) encodes its fields only when it writes, and then writes all
// of them, in order; one that never writes, or writes below its level,
// encodes nothing.
func TestLoggersEncodeTheirFieldsOnlyWhenTheyWrite(t *testing.T) {
	var out bytes.Buffer
	added := 0
	enc := countingEncoder{Encoder: zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), added: &added}
	base := zapcore.NewCore(enc, zapcore.AddSync(&out), zapcore.InfoLevel)
	root := zap.New(deferredWith{Core: base, base: base})

	quiet := root.With(zap.String("controller", "task")).With(zap.String("name", "a"), zap.String("reconcileID", "1"))
	quiet.Debug("below the level")
	if added != 0 || out.Len() != 0 {
		t.Fatalf("a logger that wrote nothing encoded %d field(s) and wrote %q", added, out.String())
	}

	parent := root.With(zap.String("controller", "task"))
	child := parent.With(zap.String("name", "a"))
	child.Info("hello", zap.String("extra", "x"))
	parent.Info("parent")
	var line1, line2 map[string]any
	lines := bytes.Split(bytes.TrimSpace(out.Bytes()), []byte("\n"))
	if len(lines) != 2 {
		t.Fatalf("wrote %d lines, want 2: %q", len(lines), out.String())
	}
	if err := json.Unmarshal(lines[0], &line1); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(lines[1], &line2); err != nil {
		t.Fatal(err)
	}
	if line1["controller"] != "task" || line1["name"] != "a" || line1["extra"] != "x" {
		t.Errorf("the child's line lacks a field: %s", lines[0])
	}
	if line2["controller"] != "task" || line2["name"] != nil {
		t.Errorf("the parent's line has the child's field or lacks its own: %s", lines[1])
	}
	if !bytes.Contains(lines[0], []byte(`"controller":"task","name":"a","extra":"x"`)) {
		t.Errorf("the fields are not in the order they were added: %s", lines[0])
	}
}
