package apitest_test

import (
	"slices"
	"testing"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/httpapi/apitest"
)

// The OpenAPI document lists exactly the problem types of the catalogue in
// domain, so every error a response carries is documented, and adding a
// problem type without documenting it fails here.
func TestProblemTypesAreDocumented(t *testing.T) {
	doc := apitest.Document(t)
	s := doc.Components.Schemas["Problem"]
	if s == nil || s.Value == nil || s.Value.Properties["type"] == nil {
		t.Fatal("components.schemas.Problem.type is missing")
	}
	var got []string
	for _, v := range s.Value.Properties["type"].Value.Enum {
		got = append(got, v.(string))
	}
	var want []string
	for _, p := range domain.Problems() {
		want = append(want, p.TypeURI())
		if p.Status < 400 || p.Title == "" || p.About == "" {
			t.Errorf("%s: status %d, title %q: every problem type needs a 4xx/5xx status, a title and an explanation", p.Code, p.Status, p.Title)
		}
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("Problem.type enum %v, want the catalogue %v", got, want)
	}
}
