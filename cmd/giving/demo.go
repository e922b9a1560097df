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

// demoRecord remembers the demo partner across restarts, and the prefix of
// the key the last start printed. It holds no key: keys are only ever
// stored hashed, so a start cannot show the previous key again; it issues a
// fresh one and revokes the previous, so exactly one demo key is valid.
type demoRecord struct {
	PartnerID string `json:"partner_id"`
	KeyPrefix string `json:"key_prefix,omitempty"`
}

// demoBrand is what donors see of the demo partner: enough to show the
// flow's header, footer and consent as a branded partner's.
var demoBrand = domain.Brand{
	DisplayName: "Demo Partner Giving",
	SupportURL:  "https://localhost/help",
	PrivacyURL:  "https://localhost/privacy",
	TermsURL:    "https://localhost/terms",
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
		rec.PartnerID, key, err = ops.CreatePartner(ctx, "Demo Partner", []string{"https://localhost"}, demoBrand)
	} else {
		key, err = ops.IssueKey(ctx, rec.PartnerID)
	}
	if err != nil {
		return fmt.Errorf("demo partner key: %w", err)
	}
	previous := rec.KeyPrefix
	rec.KeyPrefix = key.Prefix
	data, _ := json.Marshal(rec)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return fmt.Errorf("demo partner: %w", err)
	}
	if previous != "" {
		// Already revoked by an operator, or gone: nothing left to do.
		if _, err := ops.RevokeKey(ctx, previous); err != nil && domain.ErrorKind(err) != domain.KindConflict && domain.ErrorKind(err) != domain.KindNotFound {
			return fmt.Errorf("revoke the previous demo key %s: %w", previous, err)
		}
	}
	if err := st.Projector.CatchUp(ctx); err != nil {
		return fmt.Errorf("demo partner key: %w", err)
	}
	link, err := st.App.CreateDashboardLink(ctx, rec.PartnerID, key.Prefix)
	if err != nil {
		return fmt.Errorf("demo dashboard link: %w", err)
	}
	fmt.Fprintf(stdout, `
Demo partner: %s (redirect origin https://localhost)
API key:      %s   (shown once; each start with --demo issues a fresh one and revokes the one before)
Dashboard:    %s
              (opens once, within 10 minutes; another: giving dashboard --api-key $K)

For docs/getting-started.md, in another terminal:
  export B=%s K=%s

Try it:
  curl -s $B/v1/churches/import \
    -H "Authorization: Bearer $K" \
    -H 'Idempotency-Key: demo-1' \
    -H 'Content-Type: application/json' \
    -d '{"churches":[{"name":"Grace Chapel","external_id":"crm-1"}]}'
`, rec.PartnerID, key.Secret, link.URL, public, key.Secret)
	return nil
}
