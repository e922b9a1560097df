package main

import (
	"flag"
	"fmt"
	"strings"
	"testing"

	"github.com/partnergiving/giving/internal/docsection"
)

// docs/operations.md lists every flag of serve with its GIVING_* variable,
// default and meaning, generated from the flag set itself: this test fails
// when the page drifts from it, and with -update-docs rewrites the page.
func TestOperationsDocListsEveryServeFlag(t *testing.T) {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	var f serveFlags
	f.register(fs)
	var table strings.Builder
	table.WriteString("| flag | variable | default | meaning |\n|---|---|---|---|\n")
	fs.VisitAll(func(fl *flag.Flag) {
		def := "(empty)"
		if fl.DefValue != "" {
			def = "`" + fl.DefValue + "`"
		}
		fmt.Fprintf(&table, "| `--%s` | `%s` | %s | %s |\n", fl.Name, envName(fl.Name), def, strings.ReplaceAll(fl.Usage, "|", `\|`))
	})
	docsection.Check(t, "../../docs/operations.md", "serve flags", table.String())
}
