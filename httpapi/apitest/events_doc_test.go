package apitest_test

import (
	"encoding/json"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"go.yaml.in/yaml/v3"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/httpapi"
	"github.com/partnergiving/giving/httpapi/apitest"
)

// Every public event type is documented for both channels: as a variant of
// the feed's Event schema and as a webhook, and its payload schema lists
// exactly the fields of the domain payload struct, which is the allowlist of
// what the event can carry. Adding an event type without documenting it
// fails here.
func TestEveryPublicEventTypeIsDocumented(t *testing.T) {
	doc := apitest.Document(t)
	event := doc.Components.Schemas["Event"]
	if event == nil || event.Value == nil {
		t.Fatal("components.schemas.Event is missing")
	}
	variants := map[string]*openapi3.Schema{}
	for _, ref := range event.Value.OneOf {
		variants[eventTypeConst(t, ref.Value)] = ref.Value
	}
	for _, typ := range domain.PublicEventTypes() {
		t.Run(typ, func(t *testing.T) {
			variant := variants[typ]
			if variant == nil {
				t.Fatalf("Event.oneOf has no variant with event_type const %q", typ)
			}
			if m := event.Value.Discriminator; m == nil || m.Mapping[typ].Ref == "" {
				t.Errorf("Event.discriminator.mapping lacks %q", typ)
			}
			checkEnvelope(t, variant)
			checkPayload(t, typ, variant.Properties["payload"].Value)
			checkWebhook(t, doc, typ)
		})
	}
	if len(variants) != len(domain.PublicEventTypes()) {
		t.Errorf("Event.oneOf documents %d types, the domain has %d public ones", len(variants), len(domain.PublicEventTypes()))
	}
}

func eventTypeConst(t *testing.T, s *openapi3.Schema) string {
	t.Helper()
	p := s.Properties["event_type"]
	if p == nil || p.Value == nil {
		t.Fatal("an Event variant has no event_type")
	}
	c, _ := p.Value.Const.(string)
	return c
}

func checkEnvelope(t *testing.T, s *openapi3.Schema) {
	t.Helper()
	want := []string{"church_id", "event_id", "event_type", "occurred_at", "payload"}
	req := append([]string(nil), s.Required...)
	sort.Strings(req)
	if strings.Join(req, ",") != strings.Join(want, ",") || strings.Join(keys(s.Properties), ",") != strings.Join(want, ",") {
		t.Errorf("envelope fields %v required %v, want exactly %v", keys(s.Properties), req, want)
	}
	if s.AdditionalProperties.Has == nil || *s.AdditionalProperties.Has {
		t.Error("envelope must set additionalProperties: false")
	}
}

func checkPayload(t *testing.T, typ string, s *openapi3.Schema) {
	t.Helper()
	spec, _ := domain.EventTypeSpec(typ)
	fields := jsonFields(reflect.TypeOf(spec.New()).Elem())
	if got := keys(s.Properties); strings.Join(got, ",") != strings.Join(fields, ",") {
		t.Errorf("payload schema lists %v, the payload struct allows %v", got, fields)
	}
	if s.AdditionalProperties.Has == nil || *s.AdditionalProperties.Has {
		t.Error("payload schema must set additionalProperties: false")
	}
}

func checkWebhook(t *testing.T, doc *openapi3.T, typ string) {
	t.Helper()
	item := doc.Webhooks[typ]
	if item == nil || item.Post == nil {
		t.Fatalf("webhooks[%q].post is missing", typ)
	}
	op := item.Post
	var signed bool
	for _, p := range op.Parameters {
		signed = signed || (p.Value.In == "header" && p.Value.Name == "Service-Signature" && p.Value.Required)
	}
	if !signed {
		t.Error("webhook does not require the Service-Signature header")
	}
	body := op.RequestBody.Value.Content.Get("application/json")
	if body == nil || body.Schema == nil || eventTypeConst(t, body.Schema.Value) != typ {
		t.Errorf("webhook body is not the %s envelope", typ)
	}
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// jsonFields lists the JSON names a struct serialises.
func jsonFields(rt reflect.Type) []string {
	var out []string
	for f := range rt.Fields() {
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch name {
		case "-":
			continue
		case "":
			name = f.Name
		}
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// The payload schemas of the document are the ones GET /v1/event_types
// serves (httpapi.EventTypes, reflected from the domain payload structs):
// the same JSON Schema, keyword for keyword. Each served schema stands
// alone (no $ref), declares draft 2020-12, and compiles.
func TestPayloadSchemasAreTheEventCatalogues(t *testing.T) {
	doc := apitest.Document(t)
	var raw struct {
		Components struct {
			Schemas map[string]any `yaml:"schemas"`
		} `yaml:"components"`
	}
	if err := yaml.Unmarshal(httpapi.OpenAPIYAML, &raw); err != nil {
		t.Fatal(err)
	}
	types := httpapi.EventTypes()
	if len(types) != len(domain.PublicEventTypes()) {
		t.Fatalf("%d event types served, %d public", len(types), len(domain.PublicEventTypes()))
	}
	for _, et := range types {
		t.Run(et.Type, func(t *testing.T) {
			spec, _ := domain.EventTypeSpec(et.Type)
			if et.Summary != spec.Summary {
				t.Errorf("summary %q, the catalogue says %q", et.Summary, spec.Summary)
			}
			served := normalJSON(t, et.PayloadSchema)
			if served["$schema"] != "https://json-schema.org/draft/2020-12/schema" {
				t.Errorf("$schema %v", served["$schema"])
			}
			if strings.Contains(string(et.PayloadSchema), `"$ref"`) {
				t.Errorf("the schema is not standalone: %s", et.PayloadSchema)
			}
			if schemas, err := apitest.PayloadSchemas(); err != nil || schemas[et.Type] == nil {
				t.Errorf("the schema does not compile: %v", err)
			}
			delete(served, "$schema")

			ref := documentedPayload(t, doc, et.Type)
			name := strings.TrimPrefix(ref, "#/components/schemas/")
			documented, err := json.Marshal(raw.Components.Schemas[name])
			if err != nil {
				t.Fatal(err)
			}
			if got := normalJSON(t, documented); !reflect.DeepEqual(got, served) {
				want, _ := json.MarshalIndent(served, "", "  ")
				t.Errorf("components.schemas.%s differs from the served payload schema:\n%s\nwant:\n%s", name, documented, want)
			}
		})
	}
}

// documentedPayload is the reference the document's Event variant of typ
// makes for its payload.
func documentedPayload(t *testing.T, doc *openapi3.T, typ string) string {
	t.Helper()
	for _, ref := range doc.Components.Schemas["Event"].Value.OneOf {
		if eventTypeConst(t, ref.Value) == typ {
			if p := ref.Value.Properties["payload"]; p != nil && p.Ref != "" {
				return p.Ref
			}
			t.Fatalf("the %s variant's payload is not a reference to a components schema", typ)
		}
	}
	t.Fatalf("no Event variant for %s", typ)
	return ""
}

// normalJSON decodes JSON into plain maps, so that two documents compare
// by content whatever their key order or number formatting.
func normalJSON(t *testing.T, data []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatalf("%s: %v", data, err)
	}
	return m
}
