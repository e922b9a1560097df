package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/partnergiving/giving/app"
	"github.com/partnergiving/giving/domain"
)

// demoRecord remembers the demo partner across restarts. It holds no key:
// keys are only ever stored hashed, so each start issues a fresh one.
type demoRecord struct {
	PartnerID string `json:"partner_id"`
}

func printDemo(ctx context.Context, ops *app.Operators, dataDir, public string, stdout io.Writer) error {
	path := filepath.Join(dataDir, "demo-partner.json")
	var rec demoRecord
	if data, err := os.ReadFile(path); err == nil {
		_ = json.Unmarshal(data, &rec)
	}
	var key domain.NewKey
	var err error
	if rec.PartnerID == "" {
		rec.PartnerID, key, err = ops.CreatePartner(ctx, "Demo Partner", []string{"https://localhost"})
		if err != nil {
			return fmt.Errorf("demo partner: %w", err)
		}
		data, _ := json.Marshal(rec)
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return fmt.Errorf("demo partner: %w", err)
		}
	} else if key, err = ops.IssueKey(ctx, rec.PartnerID); err != nil {
		return fmt.Errorf("demo partner key: %w", err)
	}
	fmt.Fprintf(stdout, `
Demo partner: %s (redirect origin https://localhost)
API key:      %s   (shown once; each start with --demo issues a fresh one)

Try it:
  curl -s %s/v1/churches/import \
    -H 'Authorization: Bearer %s' \
    -H 'Idempotency-Key: demo-1' \
    -H 'Content-Type: application/json' \
    -d '{"churches":[{"name":"Grace Chapel","external_id":"crm-1"}]}'
`, rec.PartnerID, key.Secret, public, key.Secret)
	return nil
}
