package main

import (
	"flag"
	"os"
	"strings"
	"testing"
)

// The README names every serve flag and its variable, and CI runs the README's test command.
func TestReadmeDocumentsEveryServeFlag(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	var f serveFlags
	f.register(fs)
	fs.VisitAll(func(fl *flag.Flag) {
		env := "GIVING_" + strings.ToUpper(strings.ReplaceAll(fl.Name, "-", "_"))
		if !strings.Contains(string(readme), "`--"+fl.Name+"`") || !strings.Contains(string(readme), "`"+env+"`") {
			t.Errorf("README.md does not document --%s and %s", fl.Name, env)
		}
	})
	for _, cmd := range []string{"go run ./cmd/giving serve --demo", "go test ./..."} {
		if !strings.Contains(string(readme), cmd) {
			t.Errorf("README.md lacks the set-up command %q", cmd)
		}
	}
	ci, err := os.ReadFile("../../.ci/run")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(ci), "go test ") || !strings.Contains(string(ci), " ./...") || !strings.Contains(string(ci), "GIVING_REQUIRE_BROWSER=1") {
		t.Errorf(".ci/run does not run the README's test command with the browser required:\n%s", ci)
	}
}
