package apitest_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
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
		props := schemaProperties(t, et.PayloadSchema)
		// The payload in the order the service writes it: the schema's.
		var payload []string
		fmt.Fprintf(&page, "## `%s`\n\n%s\n\n| field | type | meaning |\n|---|---|---|\n", et.Type, et.Summary)
		for _, p := range props {
			v, err := json.Marshal(p.example())
			if err != nil {
				t.Fatal(err)
			}
			payload = append(payload, fmt.Sprintf("%q:%s", p.name, v))
			fmt.Fprintf(&page, "| `%s` | %s | %s |\n", p.name, p.typeText(), strings.ReplaceAll(p.Description, "|", `\|`))
		}
		church := exampleID("ch")
		if strings.HasPrefix(et.Type, "webhook_endpoint.") {
			church = ""
		}
		env, err := json.Marshal(struct {
			ID         string          `json:"event_id"`
			Type       string          `json:"event_type"`
			OccurredAt string          `json:"occurred_at"`
			ChurchID   string          `json:"church_id"`
			Payload    json.RawMessage `json:"payload"`
		}{exampleID("evt"), et.Type, exampleTime, church, json.RawMessage("{" + strings.Join(payload, ",") + "}")})
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

const exampleTime = "2026-11-21T15:04:07.203Z"

// exampleID is an id of the form the service issues, with a fixed body.
func exampleID(prefix string) string { return prefix + "_3MVRNirMdOL3TKR7B7s0qO1U6rp" }

// property is one payload field of a schema, in the schema's order.
type property struct {
	name        string
	Type        any    `json:"type"`
	Pattern     string `json:"pattern"`
	Enum        []any  `json:"enum"`
	Examples    []any  `json:"examples"`
	Description string `json:"description"`
}

var idPattern = regexp.MustCompile(`^\^([a-z]+)_\[0-9A-Za-z\]\{27\}\$$`)

// example is a value the field's schema accepts.
func (p property) example() any {
	switch {
	case len(p.Enum) > 0:
		return p.Enum[0]
	case len(p.Examples) > 0:
		return p.Examples[0]
	case idPattern.MatchString(p.Pattern):
		return exampleID(idPattern.FindStringSubmatch(p.Pattern)[1])
	case strings.Contains(p.Pattern, `T\d{2}:`):
		return exampleTime
	case p.typeName() == "number":
		return json.Number("25.50")
	case p.typeName() == "integer":
		return 1
	}
	return "trc_" + strings.TrimPrefix(exampleID("x"), "x_")
}

func (p property) typeName() string {
	if s, ok := p.Type.(string); ok {
		return s
	}
	if list, ok := p.Type.([]any); ok && len(list) > 0 {
		return fmt.Sprint(list[0])
	}
	return "any"
}

func (p property) typeText() string {
	switch {
	case len(p.Enum) > 0:
		var vals []string
		for _, v := range p.Enum {
			vals = append(vals, fmt.Sprintf("`%v`", v))
		}
		return "one of " + strings.Join(vals, ", ")
	case idPattern.MatchString(p.Pattern):
		return "string, `" + idPattern.FindStringSubmatch(p.Pattern)[1] + "_...`"
	}
	return p.typeName()
}

// schemaProperties reads a payload schema's properties in their order.
func schemaProperties(t *testing.T, schema []byte) []property {
	t.Helper()
	var top struct {
		Properties json.RawMessage `json:"properties"`
	}
	if err := json.Unmarshal(schema, &top); err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(top.Properties))
	if _, err := dec.Token(); err != nil { // {
		t.Fatal(err)
	}
	var out []property
	for dec.More() {
		name, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		p := property{name: name.(string)}
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		out = append(out, p)
	}
	return out
}
