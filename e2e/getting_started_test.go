package e2e

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The pages a newcomer follows, run as a person would run them, in one
// bash, in this order: the binary built from ./cmd/giving as ./giving in a
// fresh directory, "./giving serve --demo" there (on random ports: the only
// change to the documented commands), the export line it prints, then every
// shell block marked <!-- walkthrough --> in order. A block marked
// <!-- file: NAME --> is written to NAME in that directory first, for the
// blocks after it to run. Each block's answer must match the output block
// the page shows after it, ids, times and "..." aside. A page that drifts
// from the service fails here.
var walkthroughPages = []string{"../docs/getting-started.md", "../docs/webhooks.md"}

func TestGettingStartedWalkthrough(t *testing.T) {
	t.Parallel()
	for _, tool := range []string{"bash", "curl", "go", "node", "python3"} {
		if _, err := exec.LookPath(tool); err != nil {
			// CI, which sets GIVING_REQUIRE_BROWSER, installs them all.
			if os.Getenv("GIVING_REQUIRE_BROWSER") == "1" {
				t.Fatalf("the walk-through needs %s", tool)
			}
			t.Skipf("the walk-through needs %s", tool)
		}
	}
	var blocks []walkBlock
	for _, page := range walkthroughPages {
		blocks = append(blocks, walkthrough(t, page)...)
	}
	if len(blocks) < 20 || !blocks[0].setup {
		t.Fatalf("the pages mark %d walk-through blocks, the first a setup block: %v; want the quickstart's set-up and at least 20", len(blocks), blocks[0].setup)
	}
	// The set-up block is what the test does itself: build, then serve.
	if got := commands(blocks[0].script); strings.Join(got, "\n") != "go build -o giving ./cmd/giving\n./giving serve --demo" {
		t.Fatalf("the quickstart's set-up commands changed; this test does exactly those:\n%s", strings.Join(got, "\n"))
	}
	checkReadmeQuickstart(t, blocks[:2])
	work := t.TempDir()
	if err := os.Symlink(givingBinary(t), filepath.Join(work, "giving")); err != nil {
		t.Fatal(err)
	}
	srv := launchServeIn(t, work, nil, "--demo", "--addr", "127.0.0.1:0", "--nats-listen", "127.0.0.1:0")
	var export, natsAddr string
	srv.waitPrinted(t, "the export line", func(line string) bool {
		if _, url, ok := strings.Cut(line, "embedded NATS for operator commands: nats://xxxxx@"); ok {
			natsAddr, _, _ = strings.Cut(url, " ")
		}
		if strings.HasPrefix(strings.TrimSpace(line), "export B=") {
			export = strings.TrimSpace(line)
		}
		return export != "" && natsAddr != ""
	})
	// What differs from the documented machine: the service's and the
	// receivers' ports (9000 to 9003), and the operator listener's.
	ports := freePorts(t, 4)
	var toFree, toDocumented []string
	for i, p := range ports {
		free, doc := fmt.Sprintf("127.0.0.1:%d", p), fmt.Sprintf("127.0.0.1:%d", 9000+i)
		toFree, toDocumented = append(toFree, doc, free), append(toDocumented, free, doc)
	}
	receivers := strings.NewReplacer(toFree...)
	documented := strings.NewReplacer(append(toDocumented, srv.URL, "http://127.0.0.1:8080", natsAddr, "127.0.0.1:14222")...)

	var script strings.Builder
	script.WriteString("set -eu\nexec 2>&1\n")
	for i, b := range blocks[1:] {
		if b.file != "" {
			if err := os.WriteFile(filepath.Join(work, b.file), []byte(b.script+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		fmt.Fprintf(&script, "printf '\\n@@ walkthrough block %d @@\\n'\n", i+1)
		for _, line := range strings.Split(b.script, "\n") {
			if strings.HasPrefix(line, "export B=") {
				if !outputMatches(line, documented.Replace(export)) {
					t.Fatalf("%s: %q does not match the line serve --demo printed, %q", b.at, line, export)
				}
				line = export
			}
			script.WriteString(receivers.Replace(line) + "\n")
		}
	}
	out, err := runWalkthrough(t, work, script.String())
	outputs := splitBlocks(out)
	last := 0 // the last block that started
	for n := range outputs {
		last = max(last, n)
	}
	for i, b := range blocks[1:] {
		n := i + 1
		if b.file != "" {
			continue
		}
		got := documented.Replace(outputs[n])
		if err != nil && n == last {
			t.Fatalf("%s: this block failed (%v):\n%s\nit printed:\n%s", b.at, err, b.script, got)
		}
		if b.want != "" && !outputMatches(b.want, got) {
			t.Errorf("%s: the block answers\n%s\nbut the page shows\n%s", b.at, got, b.want)
		}
	}
	if err != nil || last != len(blocks)-1 {
		t.Fatalf("the walk-through ran %d of %d blocks: %v\n%s", last, len(blocks)-1, err, out)
	}
}

// walkBlock is one marked block of a page and the output shown after it.
type walkBlock struct {
	at     string // page:line
	setup  bool
	file   string // the name to write the block to, for a file block
	script string
	want   string
}

// walkthrough reads a page's marked blocks in order. A shell block is
// marked by a line "<!-- walkthrough -->" (or "<!-- walkthrough: setup -->")
// right before its ```sh fence; a ```json or ```text block right after it
// (blank lines aside) is its documented output. A line "<!-- file: NAME -->"
// marks the fenced block after it, in any language, as a file.
func walkthrough(t *testing.T, path string) []walkBlock {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	fence := func(from int) (body string, end int) {
		var b []string
		for end = from + 1; end < len(lines) && strings.TrimSpace(lines[end]) != "```"; end++ {
			b = append(b, lines[end])
		}
		if end == len(lines) {
			t.Fatalf("%s:%d: unclosed fence", path, from+1)
		}
		return strings.Join(b, "\n"), end
	}
	var out []walkBlock
	for i := 0; i < len(lines); i++ {
		marker := strings.TrimSpace(lines[i])
		if name, ok := strings.CutPrefix(marker, "<!-- file: "); ok {
			if i+1 >= len(lines) || !strings.HasPrefix(lines[i+1], "```") {
				t.Fatalf("%s:%d: a file marker must sit right before a fenced block", path, i+1)
			}
			b := walkBlock{at: fmt.Sprintf("%s:%d", path, i+2), file: strings.TrimSuffix(name, " -->")}
			var end int
			b.script, end = fence(i + 1)
			out = append(out, b)
			i = end
			continue
		}
		if !strings.HasPrefix(marker, "<!-- walkthrough") {
			if lang, ok := strings.CutPrefix(marker, "```"); ok && lang != "" && lang != "mermaid" {
				// Output blocks are read with the block before them; any
				// other block here is code that would not run.
				t.Fatalf("%s:%d: a ```%s block that is not marked to run; every code block of these pages runs", path, i+1, lang)
			}
			continue
		}
		if i+1 >= len(lines) || strings.TrimSpace(lines[i+1]) != "```sh" {
			t.Fatalf("%s:%d: a walk-through marker must sit right before a ```sh block", path, i+1)
		}
		b := walkBlock{at: fmt.Sprintf("%s:%d", path, i+2), setup: strings.Contains(marker, "setup")}
		var end int
		b.script, end = fence(i + 1)
		j := end + 1
		for j < len(lines) && strings.TrimSpace(lines[j]) == "" {
			j++
		}
		if j < len(lines) && (lines[j] == "```json" || lines[j] == "```text") {
			b.want, end = fence(j)
		}
		out = append(out, b)
		i = end
	}
	return out
}

// commands are a script's lines without comments.
func commands(script string) []string {
	var out []string
	for _, line := range strings.Split(script, "\n") {
		line, _, _ = strings.Cut(line, "#")
		if line = strings.TrimSpace(line); line != "" {
			out = append(out, line)
		}
	}
	return out
}

// runWalkthrough runs script with bash in dir, in a process group of its
// own so that what it leaves in the background is stopped with it.
func runWalkthrough(t *testing.T, dir, script string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", script)
	cmd.Dir = dir
	cmd.Env = cleanEnv()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	return out.String(), err
}

var blockMarker = regexp.MustCompile(`^@@ walkthrough block (\d+) @@$`)

// splitBlocks cuts the walk-through's output at the markers between
// blocks: block n's output is out[n]; out[0] is what came before the first.
func splitBlocks(out string) map[int]string {
	res := map[int]string{0: ""}
	n := 0
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if m := blockMarker.FindStringSubmatch(sc.Text()); m != nil {
			n, _ = strconv.Atoi(m[1])
			res[n] = ""
			continue
		}
		res[n] += sc.Text() + "\n"
	}
	return res
}

var (
	walkID   = regexp.MustCompile(`\b([a-z]{2,5})_[0-9A-Za-z]{27}\b`)
	walkTime = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z`)
)

// checkReadmeQuickstart requires the README's quickstart to be the
// walk-through's first two blocks, command for command.
func checkReadmeQuickstart(t *testing.T, first []walkBlock) {
	t.Helper()
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, b := range first {
		want = append(want, commands(b.script)...)
	}
	for _, cmd := range want {
		if !strings.Contains(string(readme), cmd) {
			t.Errorf("README.md's quickstart lacks %q, which docs/getting-started.md runs", cmd)
		}
	}
}

// outputMatches compares an answer with the page's rendering of it: ids
// and timestamps stand for any, "..." for anything, and whitespace (the
// a page wraps long JSON) is ignored.
func outputMatches(doc, got string) bool {
	norm := func(s string) string {
		s = walkID.ReplaceAllString(s, "${1}_ID")
		s = walkTime.ReplaceAllString(s, "TIME")
		return strings.Join(strings.Fields(s), "")
	}
	pattern := strings.ReplaceAll(regexp.QuoteMeta(norm(doc)), `\.\.\.`, ".*?")
	return regexp.MustCompile(`(?s)^` + pattern + `$`).MatchString(norm(got))
}
