package e2e

import (
	"bytes"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The README is a front door: short, with the two set-up commands that CI
// runs as written.
func TestReadmeIsAFrontDoor(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(readme, []byte("\n")); n > 200 {
		t.Errorf("README.md has %d lines; keep it to 200 and move the rest to docs/", n)
	}
	for _, cmd := range []string{"go run ./cmd/giving serve --demo", "go test ./..."} {
		if !bytes.Contains(readme, []byte(cmd)) {
			t.Errorf("README.md lacks the set-up command %q", cmd)
		}
	}
	ci, err := os.ReadFile("../.ci/run")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(ci, []byte("go test ")) || !bytes.Contains(ci, []byte(" ./...")) || !bytes.Contains(ci, []byte("GIVING_REQUIRE_BROWSER=1")) {
		t.Errorf(".ci/run does not run the README's test command with the browser required:\n%s", ci)
	}
}

var (
	mdLink    = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	mdHeading = regexp.MustCompile(`(?m)^#{1,6} +(.+?) *$`)
)

// Every relative link of the README, the changelog, the benchmarks and the
// pages under docs/ leads to a file that exists and, when it names an
// anchor, to a heading of that file.
func TestDocLinksResolve(t *testing.T) {
	t.Parallel()
	pages, _ := filepath.Glob("../docs/*.md")
	pages = append(pages, "../README.md", "../CHANGELOG.md", "../BENCHMARKS.md")
	if len(pages) < 10 {
		t.Fatalf("found %d pages, want the README and docs/", len(pages))
	}
	for _, page := range pages {
		data, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		text := stripFences(string(data))
		for _, m := range mdLink.FindAllStringSubmatch(text, -1) {
			target := m[1]
			if u, err := url.Parse(target); err != nil || u.Scheme != "" {
				continue
			}
			file, anchor, _ := strings.Cut(target, "#")
			path := page
			if file != "" {
				path = filepath.Join(filepath.Dir(page), file)
				if _, err := os.Stat(path); err != nil {
					t.Errorf("%s: the link %s leads nowhere: %v", page, target, err)
					continue
				}
			}
			if anchor != "" && !hasAnchor(t, path, anchor) {
				t.Errorf("%s: the link %s names no heading of %s", page, target, path)
			}
		}
	}
}

// stripFences drops fenced code blocks, whose brackets are code.
func stripFences(s string) string {
	var out []string
	in := false
	for _, line := range strings.Split(s, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			in = !in
			continue
		}
		if !in {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

// hasAnchor reports whether a heading of the markdown file at path has the
// anchor a code host gives it: lower case, punctuation dropped, spaces as
// hyphens.
func hasAnchor(t *testing.T, path, anchor string) bool {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range mdHeading.FindAllStringSubmatch(stripFences(string(data)), -1) {
		var slug strings.Builder
		for _, r := range strings.ToLower(m[1]) {
			switch {
			case r == ' ':
				slug.WriteRune('-')
			case r == '-' || r == '_' || ('a' <= r && r <= 'z') || ('0' <= r && r <= '9'):
				slug.WriteRune(r)
			}
		}
		if slug.String() == anchor {
			return true
		}
	}
	return false
}

// workItem is a citation of a development round, session or work item by
// its number. The code, its comments and the documentation name things by
// what they are (a section's title, a test's name), never by the round of
// work that made them, which no reader can look up.
// A number with decimals or a multiplier after it ("donor sessions 1.4×")
// is a measurement, not a citation.
var (
	workItem    = regexp.MustCompile(`(?i)\b(session|round|issue|work[- ]item)s?(\s+|\s*(//|#)\s*)#?\d+([.,]\d+)?(×)?`)
	measurement = regexp.MustCompile(`\d([.,]\d+|×)$`)
)

// No tracked file cites one. The Redoc bundle is the npm package's file
// as published, and lock files are npm's.
func TestNoWorkItemNumbers(t *testing.T) {
	t.Parallel()
	for _, file := range trackedFiles(t) {
		if strings.HasPrefix(file, "httpapi/apidocs/redoc.standalone.js") || strings.HasSuffix(file, "package-lock.json") {
			continue
		}
		data, err := os.ReadFile(filepath.Join("..", file))
		if err != nil || bytes.IndexByte(data, 0) >= 0 {
			continue // gone from the work tree, or binary
		}
		for _, loc := range workItem.FindAllIndex(data, -1) {
			if measurement.Match(data[loc[0]:loc[1]]) {
				continue
			}
			line := bytes.Count(data[:loc[0]], []byte("\n")) + 1
			t.Errorf("%s:%d cites %q: name what it refers to instead", file, line, data[loc[0]:loc[1]])
		}
	}
}

// trackedFiles lists the repository's files: git's list when git is there,
// else every file of the work tree but .git and installed npm packages.
func trackedFiles(t *testing.T) []string {
	t.Helper()
	if out, err := exec.Command("git", "-C", "..", "ls-files", "-z").Output(); err == nil {
		return strings.Split(strings.TrimRight(string(out), "\x00"), "\x00")
	}
	var files []string
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if !d.IsDir() {
			rel, _ := filepath.Rel("..", path)
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(fmt.Errorf("walk the work tree: %w", err))
	}
	return files
}
