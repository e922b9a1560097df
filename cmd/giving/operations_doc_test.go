package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
)

var updateDocs = flag.Bool("update-docs", false, "rewrite the generated part of docs/operations.md")

// docs/operations.md lists every flag of serve with its GIVING_* variable,
// default and meaning, generated from the flag set itself: this test fails
// when the page drifts from it, and with -update-docs rewrites the page.
func TestOperationsDocListsEveryServeFlag(t *testing.T) {
	const path = "../../docs/operations.md"
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
	replaceGenerated(t, path, "serve flags", table.String())
}

// replaceGenerated compares the part of the page at path between
// "<!-- generated: name -->" and "<!-- end generated -->" with want, and
// rewrites it with -update-docs.
func replaceGenerated(t *testing.T, path, name, want string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	begin, end := "<!-- generated: "+name+" -->\n", "<!-- end generated -->"
	head, rest, ok := strings.Cut(string(data), begin)
	got, tail, ok2 := strings.Cut(rest, end)
	if !ok || !ok2 {
		t.Fatalf("%s has no %q ... %q section", path, strings.TrimSpace(begin), end)
	}
	if got == want {
		return
	}
	if !*updateDocs {
		t.Fatalf("%s's %s are out of date; run go test ./cmd/giving -run %s -update-docs\ngot:\n%s\nwant:\n%s", path, name, t.Name(), got, want)
	}
	if err := os.WriteFile(path, []byte(head+begin+want+end+tail), 0o644); err != nil {
		t.Fatal(err)
	}
}
