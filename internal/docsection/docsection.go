// Package docsection keeps the generated sections of the documentation in
// step with their source. A section is the part of a page between
// "<!-- generated: NAME -->" and "<!-- end generated -->"; the test that owns
// its source renders it and calls Check, which fails when the page differs
// and, run with -update-docs, rewrites the page instead. Imported by tests
// only; it imports nothing of this module.
package docsection

import (
	"flag"
	"os"
	"strings"
	"testing"
)

var update = flag.Bool("update-docs", false, "rewrite the generated sections of the documentation instead of failing on a difference")

// Check compares the section name of the page at path with want.
func Check(t testing.TB, path, name, want string) {
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
	if !*update {
		t.Fatalf("%s: the generated section %q is out of date; run this test with -update-docs\ngot:\n%s\nwant:\n%s", path, name, got, want)
	}
	if err := os.WriteFile(path, []byte(head+begin+want+end+tail), 0o644); err != nil {
		t.Fatal(err)
	}
}
