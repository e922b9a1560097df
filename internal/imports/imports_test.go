package imports

import (
	"bufio"
	"bytes"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/partnergiving/giving"

// pkg is one package of the module and what it imports: its code's
// imports, and its tests' too.
type pkg struct {
	path        string // relative to the module: "eventlog/vault"
	imports     []string
	testImports []string
}

// list runs go list over the whole module.
func list(t *testing.T) []pkg {
	t.Helper()
	cmd := exec.Command("go", "list", "-f", `{{.ImportPath}}|{{join .Imports " "}}|{{join .TestImports " "}} {{join .XTestImports " "}}`, module+"/...")
	cmd.Dir = "../.."
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.Bytes())
	}
	var pkgs []pkg
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Split(sc.Text(), "|")
		if len(f) != 3 {
			t.Fatalf("go list: unexpected line %q", sc.Text())
		}
		pkgs = append(pkgs, pkg{path: local(f[0]), imports: strings.Fields(f[1]), testImports: strings.Fields(f[2])})
	}
	if len(pkgs) < 10 {
		t.Fatalf("go list found %d packages: not the module", len(pkgs))
	}
	return pkgs
}

// local is path relative to the module, "" for the module's root, or path
// itself when it is outside the module.
func local(path string) string {
	if path == module {
		return ""
	}
	if rest, ok := strings.CutPrefix(path, module+"/"); ok {
		return rest
	}
	return path
}

// inModule reports whether an import path (as local returns it) is one of
// the module's packages.
func inModule(p string) bool { return !strings.Contains(strings.SplitN(p, "/", 2)[0], ".") }

// under reports whether p is dir or a package below it.
func under(p, dir string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }

// own is the module's packages among imports, as local paths.
func own(imports []string) []string {
	var out []string
	for _, i := range imports {
		if l := local(i); inModule(l) && strings.HasPrefix(i, module) {
			out = append(out, l)
		}
	}
	return out
}

// TestImportRules checks the module's import arrows. NATS stays behind
// the ledger: only eventlog and the sibling packages under it (their tests
// and the test helpers in eventlog/eventlogtest included) import
// github.com/nats-io/..., so the rest of the service works with the
// ledger's own types and "retry later" errors. domain is pure: it imports
// nothing of the module. The packages below the use cases never import
// upwards, and the transport never reaches the ledger past the use cases.
func TestImportRules(t *testing.T) {
	pkgs := list(t)
	// only[p] lists everything of the module p may import (nothing when
	// empty); a "/..." suffix allows a folder.
	only := map[string][]string{
		"domain":              {},
		"telemetry":           {},
		"secrets":             {},
		"sms":                 {},
		"internal/openloop":   {},
		"internal/cpuprofile": {},
		"simulators":          {"domain", "vendors/..."},
		"listen":              {"domain"},
		"eventlog":            {"domain", "telemetry", "secrets"},
		"projections":         {"domain", "eventlog/...", "telemetry"},
		"dispatcher":          {"domain", "eventlog/...", "projections", "secrets", "telemetry"},
	}
	// never[p] lists what p and the packages under it may not import.
	never := map[string][]string{
		"eventlog":    {"app", "dispatcher", "projections", "httpapi", "internal/stack", "internal/bench", "cmd"},
		"projections": {"app", "dispatcher", "httpapi", "internal/stack", "cmd"},
		"app":         {"httpapi", "dispatcher", "internal/stack", "cmd"},
		"httpapi":     {"eventlog", "dispatcher", "internal/stack", "cmd"},
		"dispatcher":  {"app", "httpapi", "internal/stack", "cmd"},
	}
	seen := map[string]bool{}
	for _, p := range pkgs {
		seen[p.path] = true
		for _, i := range slices.Concat(p.imports, p.testImports) {
			if strings.HasPrefix(i, "github.com/nats-io/") && !under(p.path, "eventlog") {
				t.Errorf("%s imports %s: only eventlog/... may use NATS", p.path, i)
			}
		}
		if may, ok := only[p.path]; ok {
			for _, i := range own(p.imports) {
				if !allowed(i, may) {
					t.Errorf("%s imports %s: it may import only %v of this module", p.path, i, may)
				}
			}
		}
		// domain's tests too: its rules are tested on their own.
		if p.path == "domain" {
			for _, i := range own(p.testImports) {
				if i != "domain" {
					t.Errorf("domain's tests import %s: domain imports nothing of this module", i)
				}
			}
		}
		for dir, forbidden := range never {
			if !under(p.path, dir) {
				continue
			}
			for _, i := range own(p.imports) {
				if slices.ContainsFunc(forbidden, func(f string) bool { return under(i, f) }) {
					t.Errorf("%s imports %s: nothing under %s may import %v", p.path, i, dir, forbidden)
				}
			}
		}
	}
	for p := range only {
		if !seen[p] {
			t.Errorf("no package %s: a rule names it", p)
		}
	}
}

// allowed reports whether import i is one of may: a package, or a folder
// given as "dir/...".
func allowed(i string, may []string) bool {
	for _, m := range may {
		if dir, ok := strings.CutSuffix(m, "/..."); ok && under(i, dir) || i == m {
			return true
		}
	}
	return false
}
