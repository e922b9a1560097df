package httpapi

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// The Redoc bundle the binary serves is the pinned npm package's file, byte
// for byte, with its licence notice: the committed copy exists only so that
// `go run` works on a machine without npm. The check needs the package
// installed (cd tools/redoc && npm ci --ignore-scripts; .ci/run does).
func TestRedocBundleIsThePinnedPackage(t *testing.T) {
	const tool = "../tools/redoc"
	var pin, installed struct {
		Version         string            `json:"version"`
		DevDependencies map[string]string `json:"devDependencies"`
	}
	readJSON(t, filepath.Join(tool, "package.json"), &pin)
	pkg := filepath.Join(tool, "node_modules", "redoc")
	if _, err := os.Stat(pkg); err != nil {
		if os.Getenv("GIVING_REQUIRE_BROWSER") == "1" {
			t.Fatalf("GIVING_REQUIRE_BROWSER=1 but Redoc is not installed (cd tools/redoc && npm ci --ignore-scripts): %v", err)
		}
		t.Skip("Redoc is not installed (cd tools/redoc && npm ci --ignore-scripts)")
	}
	readJSON(t, filepath.Join(pkg, "package.json"), &installed)
	if installed.Version != pin.DevDependencies["redoc"] {
		t.Fatalf("redoc %s is installed, tools/redoc pins %s", installed.Version, pin.DevDependencies["redoc"])
	}
	for _, name := range []string{"redoc.standalone.js", "redoc.standalone.js.LICENSE.txt"} {
		want, err := os.ReadFile(filepath.Join(pkg, "bundles", name))
		if err != nil {
			t.Fatal(err)
		}
		if got := assets[name].body; !bytes.Equal(got, want) {
			t.Errorf("httpapi/apidocs/%s (%d bytes) is not redoc %s's bundles/%s (%d bytes): copy it again", name, len(got), installed.Version, name, len(want))
		}
	}
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err == nil {
		err = json.Unmarshal(data, v)
	}
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}
