package apitest_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/partnergiving/giving/httpapi"
	"github.com/partnergiving/giving/httpapi/apitest"
	"github.com/partnergiving/giving/internal/docsection"
)

// docs/events.md lists every public event type, generated from the same
// catalogue GET /v1/event_types serves (httpapi.EventTypes): its summary, its
// payload's fields, and an example envelope that the published schema
// accepts. The test fails when the page drifts; -update-docs rewrites it.
func TestEventsPageIsTheCatalogue(t *testing.T) {
	var page strings.Builder
	for _, et := range httpapi.EventTypes() {
		fields, err := et.Fields()
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&page, "## `%s`\n\n%s\n\n| field | type | meaning |\n|---|---|---|\n", et.Type, et.Summary)
		for _, f := range fields {
			fmt.Fprintf(&page, "| `%s` | %s | %s |\n", f.Name, typeText(f), strings.ReplaceAll(f.Description, "|", `\|`))
		}
		env, err := et.Example()
		if err != nil {
			t.Fatal(err)
		}
		if err := apitest.ValidateEvent(env); err != nil {
			t.Fatalf("the example of %s: %v", et.Type, err)
		}
		fmt.Fprintf(&page, "\n```json\n%s\n```\n\n", env)
	}
	docsection.Check(t, "../../docs/events.md", "event types", page.String())
}

// typeText is a field's type as the page's table says it.
func typeText(f httpapi.PayloadField) string {
	switch {
	case len(f.Enum) > 0:
		var vals []string
		for _, v := range f.Enum {
			vals = append(vals, fmt.Sprintf("`%v`", v))
		}
		return "one of " + strings.Join(vals, ", ")
	case f.IDPrefix() != "":
		return "string, `" + f.IDPrefix() + "_...`"
	}
	return f.TypeName()
}
