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

// The README's quickstart and walk-through, run as a person would run them:
// the binary built from ./cmd/giving as ./giving in a fresh directory,
// "./giving serve --demo" there (on random ports: the only change to the
// documented commands), the export line it prints, then every shell block
// marked <!-- walkthrough --> in order, in one bash, in that directory.
// Each block's answer must match the output block the README shows after
// it, ids, times and "..." aside. A README that drifts from the service
// fails here.
func TestReadmeWalkthrough(t *testing.T) {
	for _, tool := range []string{"bash", "curl"} {
		if _, err := exec.LookPath(tool); err != nil {
			// CI, which sets GIVING_REQUIRE_BROWSER, installs both.
			if os.Getenv("GIVING_REQUIRE_BROWSER") == "1" {
				t.Fatalf("the README's walk-through needs %s", tool)
			}
			t.Skipf("the README's walk-through needs %s", tool)
		}
	}
	blocks := readmeWalkthrough(t, "../README.md")
	if len(blocks) < 15 || !blocks[0].setup {
		t.Fatalf("the README marks %d walk-through blocks, the first a setup block: %v; want the quickstart's set-up and at least 15", len(blocks), blocks[0].setup)
	}
	// The set-up block is what the test does itself: build, then serve.
	if got := commands(blocks[0].script); strings.Join(got, "\n") != "go build -o giving ./cmd/giving\n./giving serve --demo" {
		t.Fatalf("the quickstart's set-up commands changed; this test does exactly those:\n%s", strings.Join(got, "\n"))
	}
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
	receiver := fmt.Sprintf("127.0.0.1:%d", freePorts(t, 1)[0])
	// What differs from the README's machine: the service's and the
	// receiver's ports, and the operator listener's.
	documented := strings.NewReplacer(srv.URL, "http://127.0.0.1:8080", receiver, "127.0.0.1:9000", natsAddr, "127.0.0.1:14222")

	var script strings.Builder
	script.WriteString("set -eu\nexec 2>&1\n")
	for i, b := range blocks[1:] {
		fmt.Fprintf(&script, "printf '\\n@@ walkthrough block %d @@\\n'\n", i+1)
		for _, line := range strings.Split(b.script, "\n") {
			if strings.HasPrefix(line, "export B=") {
				if !outputMatches(line, documented.Replace(export)) {
					t.Fatalf("README.md:%d: %q does not match the line serve --demo printed, %q", b.line, line, export)
				}
				line = export
			}
			script.WriteString(strings.ReplaceAll(line, "127.0.0.1:9000", receiver) + "\n")
		}
	}
	out, err := runWalkthrough(t, work, script.String())
	outputs := splitBlocks(out)
	last := len(outputs) - 1 // the last block that started
	for i, b := range blocks[1:] {
		n := i + 1
		got := documented.Replace(outputs[n])
		if err != nil && n == last {
			t.Fatalf("README.md:%d: this block failed (%v):\n%s\nit printed:\n%s", b.line, err, b.script, got)
		}
		if b.want != "" && !outputMatches(b.want, got) {
			t.Errorf("README.md:%d: the block answers\n%s\nbut the README shows\n%s", b.line, got, b.want)
		}
	}
	if err != nil || last != len(blocks)-1 {
		t.Fatalf("the walk-through ran %d of %d blocks: %v\n%s", last, len(blocks)-1, err, out)
	}
}

// walkBlock is one marked shell block of the README and the output shown
// after it.
type walkBlock struct {
	line   int
	setup  bool
	script string
	want   string
}

// readmeWalkthrough reads the marked blocks in order. A block is marked by
// a line "<!-- walkthrough -->" (or "<!-- walkthrough: setup -->") right
// before its ```sh fence; a ```json or ```text block right after it (blank
// lines aside) is its documented output.
func readmeWalkthrough(t *testing.T, path string) []walkBlock {
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
			t.Fatalf("README.md:%d: unclosed fence", from+1)
		}
		return strings.Join(b, "\n"), end
	}
	var out []walkBlock
	for i := 0; i < len(lines); i++ {
		marker := strings.TrimSpace(lines[i])
		if !strings.HasPrefix(marker, "<!-- walkthrough") {
			continue
		}
		if i+1 >= len(lines) || strings.TrimSpace(lines[i+1]) != "```sh" {
			t.Fatalf("README.md:%d: a walk-through marker must sit right before a ```sh block", i+1)
		}
		b := walkBlock{line: i + 2, setup: strings.Contains(marker, "setup")}
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

// outputMatches compares an answer with the README's rendering of it: ids
// and timestamps stand for any, "..." for anything, and whitespace (the
// README wraps long JSON) is ignored.
func outputMatches(doc, got string) bool {
	norm := func(s string) string {
		s = walkID.ReplaceAllString(s, "${1}_ID")
		s = walkTime.ReplaceAllString(s, "TIME")
		return strings.Join(strings.Fields(s), "")
	}
	pattern := strings.ReplaceAll(regexp.QuoteMeta(norm(doc)), `\.\.\.`, ".*?")
	return regexp.MustCompile(`(?s)^` + pattern + `$`).MatchString(norm(got))
}
