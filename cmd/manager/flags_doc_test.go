package main

import (
	"flag"
	"testing"

	"github.com/taskops/task-operator/internal/docgen"
)

// TestFlagsReference: docs/reference/flags.md is the manager's flag set
// (make docs writes it).
func TestFlagsReference(t *testing.T) {
	fs := flag.NewFlagSet("manager", flag.ContinueOnError)
	var o options
	bindFlags(fs, &o)
	// controller-runtime's own, registered on the command line at init.
	if f := flag.CommandLine.Lookup("kubeconfig"); f != nil {
		fs.Var(f.Value, f.Name, f.Usage)
	}
	var rows [][]string
	fs.VisitAll(func(f *flag.Flag) {
		typ, usage := flag.UnquoteUsage(f)
		switch typ {
		case "":
			typ = "bool"
		case "value": // flag.Func
			typ = "string"
		}
		def := docgen.Code(f.DefValue)
		switch f.Name {
		case "runner-image":
			// The build's own image, which a test binary does not know.
			def = "this release's image, `ghcr.io/taskops/task-operator:<version>`"
		case "task-metrics":
			def = "`all`"
		}
		rows = append(rows, []string{docgen.Code("--" + f.Name), typ, def, usage})
	})
	docgen.Golden(t, "../../docs/reference/flags.md", docgen.OneTablePage("cmd/manager's flag set", "Manager flags",
		"The flags of the operator's manager (`/manager --help` prints the same).\n"+
			"Set them through the chart's `extraArgs` or the Deployment's `args`\n"+
			"([install.md](../install.md)).\n",
		[]string{"flag", "type", "default", "what it does"}, rows))
}
