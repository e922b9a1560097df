package apitest_test

import (
	"testing"

	"github.com/partnergiving/giving/httpapi/apitest"
)

// The document must parse and validate as OpenAPI 3.1.
func TestDocumentIsValidOpenAPI(t *testing.T) {
	doc := apitest.Document(t)
	if doc.OpenAPI != "3.1.0" {
		t.Fatalf("openapi = %q, want 3.1.0", doc.OpenAPI)
	}
}
