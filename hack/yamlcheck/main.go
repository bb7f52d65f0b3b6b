// Command yamlcheck fails when a YAML file of the repository repeats a key
// in one mapping. Most YAML readers (Helm's among them) silently keep the
// last of two equal keys, so a botched edit that duplicates a block renders
// and lints clean while it changes what a user gets; `make verify` runs
// this over every tracked YAML file:
//
//	go run ./hack/yamlcheck $(git ls-files '*.yaml' '*.yml')
//
// The chart's templates are Go templates, not YAML, and are skipped; the
// chart test renders them and parses the result.
package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"go.yaml.in/yaml/v3"
)

func main() {
	bad := 0
	for _, path := range os.Args[1:] {
		if skipped(path) {
			continue
		}
		if err := checkFile(path); err != nil {
			fmt.Fprintln(os.Stderr, err)
			bad++
		}
	}
	if bad > 0 {
		fmt.Fprintf(os.Stderr, "yamlcheck: %d file(s) with repeated keys or invalid YAML\n", bad)
		os.Exit(1)
	}
}

// skipped says whether path is not YAML itself (a Helm template).
func skipped(path string) bool {
	return strings.HasPrefix(path, "charts/") && strings.Contains(path, "/templates/")
}

func checkFile(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := check(data); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// check decodes every document of data; the decoder refuses a mapping that
// defines one key twice ("mapping key "x" already defined at line N").
func check(data []byte) error {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for doc := 1; ; doc++ {
		var v any
		err := dec.Decode(&v)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("document %d: %w", doc, err)
		}
	}
}
