package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/internal/stack"
)

// demoRecord remembers the demo partner across restarts. It holds no key:
// keys are only ever stored hashed, so each start issues a fresh one.
type demoRecord struct {
	PartnerID string `json:"partner_id"`
}

// printDemo creates the demo partner the first time, issues a fresh key,
// waits until the instance's projections know it (so the key works the
// moment it is shown), and prints it.
func printDemo(ctx context.Context, st *stack.Stack, dataDir, public string, stdout io.Writer) error {
	ops := st.Operators
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
	if err := st.Projector.CatchUp(ctx); err != nil {
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
