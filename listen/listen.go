// Package listen forwards a partner's events to a local webhook receiver,
// the way the Stripe CLI's "listen" does, without a tunnel: it follows the
// pull feed (GET /v1/events with long polling, the source of truth) and
// POSTs each event to the local address signed exactly like a real
// delivery (domain.WebhookSigner: Service-Signature and the Standard
// Webhooks headers), with a local signing secret. That secret can be
// rotated like an endpoint's: the previous one signs beside the new one
// until it expires, so a receiver's handling of an overlap can be tried
// locally.
//
// The secret and the feed position are kept in a state file per API key
// and base URL, so a restart resumes where the last run stopped: an event
// is forwarded once its forward finished, and the position saved after
// it, so after a clean stop none is lost and none forwarded twice. The
// first run starts from the end of the feed ("now"), unless FromStart.
//
// What it may import is checked by TestImportRules (internal/imports).
package listen

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/partnergiving/giving/domain"
)

// Config is what a run needs.
type Config struct {
	BaseURL   string
	APIKey    string
	ForwardTo string
	// Events are the event types to forward; empty forwards every type.
	Events []string
	// StateDir holds the state files.
	StateDir string
	// FromStart forwards the whole feed instead of starting from the end.
	FromStart bool
	// Out gets the secret at start and one line per event.
	Out io.Writer
	// Client makes the feed reads and the forwards; default a client
	// without a timeout of its own (every request has one).
	Client *http.Client
	// Wait is the long poll's hold, in seconds (default 30).
	Wait int
	// RotateSecret replaces the local secret at start with a new one; the
	// previous signs beside it for Overlap.
	RotateSecret bool
	Overlap      time.Duration
}

// State is what a run keeps between runs.
type State struct {
	BaseURL string `json:"base_url"`
	Secret  string `json:"secret"`
	// Cursor is the feed position after the last event forwarded; empty is
	// the feed's start.
	Cursor string `json:"cursor"`
	// PreviousSecret signs beside Secret until PreviousExpiresAt, after a
	// rotation.
	PreviousSecret    string    `json:"previous_secret,omitempty"`
	PreviousExpiresAt time.Time `json:"previous_expires_at,omitzero"`
}

// signer signs forwards with the secret, and the previous one until it
// expires.
func (s State) signer() domain.WebhookSigner {
	sign := domain.NewWebhookSigner(s.Secret)
	if s.PreviousSecret == "" {
		return sign
	}
	return sign.WithPrevious(domain.NewWebhookSigner(s.PreviousSecret), s.PreviousExpiresAt)
}

// StatePath is the state file of an API key at a base URL. The key is
// hashed: the file names the partner's key without holding it.
func StatePath(dir, baseURL, apiKey string) string {
	h := sha256.Sum256([]byte(strings.TrimRight(baseURL, "/") + "\n" + apiKey))
	return filepath.Join(dir, "listen-"+hex.EncodeToString(h[:8])+".json")
}

// DefaultStateDir is the user's configuration directory's giving folder.
func DefaultStateDir() string {
	dir, err := os.UserConfigDir()
	if err != nil {
		return filepath.Join(os.TempDir(), "giving")
	}
	return filepath.Join(dir, "giving")
}

// Run forwards events until ctx ends. An event being forwarded when ctx
// ends is finished first, so the saved position is exact.
func Run(ctx context.Context, cfg Config) error {
	if cfg.Client == nil {
		cfg.Client = &http.Client{}
	}
	if cfg.Wait <= 0 {
		cfg.Wait = 30
	}
	cfg.BaseURL = strings.TrimRight(cfg.BaseURL, "/")
	f := &forwarder{cfg: cfg, path: StatePath(cfg.StateDir, cfg.BaseURL, cfg.APIKey)}
	if err := f.start(ctx); err != nil {
		return err
	}
	fmt.Fprintf(cfg.Out, "Ready. Your local webhook signing secret is %s; forwarding events to %s (Ctrl-C stops)\n", f.state.Secret, cfg.ForwardTo)
	if time.Now().Before(f.state.PreviousExpiresAt) {
		fmt.Fprintf(cfg.Out, "The previous secret %s signs beside it until %s.\n", f.state.PreviousSecret, domain.FormatTime(f.state.PreviousExpiresAt))
	}
	for ctx.Err() == nil {
		if err := f.round(ctx); err != nil {
			if ctx.Err() != nil {
				break
			}
			var fatal fatalError
			if errors.As(err, &fatal) {
				return err
			}
			fmt.Fprintf(cfg.Out, "feed: %v; retrying\n", err)
			select {
			case <-ctx.Done():
			case <-time.After(2 * time.Second):
			}
		}
	}
	return nil
}

type forwarder struct {
	cfg   Config
	path  string
	state State
	sign  domain.WebhookSigner
}

// fatalError is an answer that retrying cannot change (a refused key, an
// unknown event type).
type fatalError struct{ error }

// start loads the state, or makes it: a new secret, and the end of the
// feed as the position unless FromStart; and rotates the secret when asked.
func (f *forwarder) start(ctx context.Context) error {
	data, err := os.ReadFile(f.path)
	switch {
	case err == nil:
		if err := json.Unmarshal(data, &f.state); err != nil || !strings.HasPrefix(f.state.Secret, domain.WebhookSecretPrefix) {
			return fmt.Errorf("state file %s is unreadable; delete it to start over: %v", f.path, err)
		}
	case errors.Is(err, os.ErrNotExist):
		f.state = State{BaseURL: f.cfg.BaseURL, Secret: domain.GenerateWebhookSecret()}
		if !f.cfg.FromStart {
			if f.state.Cursor, err = f.end(ctx); err != nil {
				return err
			}
		}
	default:
		return err
	}
	if f.cfg.FromStart {
		f.state.Cursor = ""
	}
	if f.cfg.RotateSecret {
		f.state.PreviousSecret, f.state.Secret = f.state.Secret, domain.GenerateWebhookSecret()
		f.state.PreviousExpiresAt = time.Now().Add(f.cfg.Overlap).UTC()
	}
	f.sign = f.state.signer()
	return f.save()
}

// end is the position after the feed's last event.
func (f *forwarder) end(ctx context.Context) (string, error) {
	cursor := ""
	for {
		p, err := f.page(ctx, cursor, 1000, 0)
		if err != nil {
			return "", err
		}
		cursor = p.NextCursor
		if !p.HasMore {
			return cursor, nil
		}
	}
}

type page struct {
	Data       []json.RawMessage `json:"data"`
	NextCursor string            `json:"next_cursor"`
	HasMore    bool              `json:"has_more"`
}

// page reads one feed page after cursor.
func (f *forwarder) page(ctx context.Context, cursor string, limit, wait int) (page, error) {
	q := url.Values{"limit": {fmt.Sprint(limit)}, "wait": {fmt.Sprint(wait)}}
	if cursor != "" {
		q.Set("since_cursor", cursor)
	}
	if len(f.cfg.Events) > 0 {
		q.Set("type", strings.Join(f.cfg.Events, ","))
	}
	ctx, cancel := context.WithTimeout(ctx, time.Duration(wait+30)*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, f.cfg.BaseURL+"/v1/events?"+q.Encode(), nil)
	if err != nil {
		return page{}, fatalError{err}
	}
	req.Header.Set("Authorization", "Bearer "+f.cfg.APIKey)
	resp, err := f.cfg.Client.Do(req)
	if err != nil {
		return page{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return page{}, err
	}
	if resp.StatusCode != http.StatusOK {
		err := fmt.Errorf("GET /v1/events answered %s: %s", resp.Status, bytes.TrimSpace(body))
		if resp.StatusCode/100 == 4 && resp.StatusCode != http.StatusTooManyRequests {
			return page{}, fatalError{err}
		}
		return page{}, err
	}
	var p page
	if err := json.Unmarshal(body, &p); err != nil {
		return page{}, fmt.Errorf("GET /v1/events: %w", err)
	}
	return p, nil
}

// round waits for a page of events and forwards it, saving the position
// after the page; when ctx ends mid-page, after the last event forwarded.
func (f *forwarder) round(ctx context.Context) error {
	p, err := f.page(ctx, f.state.Cursor, 100, f.cfg.Wait)
	if err != nil {
		return err
	}
	for i, ev := range p.Data {
		if ctx.Err() != nil {
			// Stopped mid-page: the position after the i events forwarded
			// is the next cursor of a page of i events from the same start.
			if i > 0 {
				cut, err := f.page(context.WithoutCancel(ctx), f.state.Cursor, i, 0)
				if err != nil {
					return err
				}
				f.state.Cursor = cut.NextCursor
			}
			return f.save()
		}
		f.forward(ctx, ev)
	}
	if len(p.Data) == 0 && p.NextCursor == "" {
		return nil
	}
	f.state.Cursor = p.NextCursor
	return f.save()
}

// forward POSTs one event to the local receiver, signed like a delivery,
// and prints how it went. A forward under way when ctx ends is finished.
func (f *forwarder) forward(ctx context.Context, ev json.RawMessage) {
	env, _ := domain.ReadEnvelopeHeader(ev)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	start := time.Now()
	line := fmt.Sprintf("%s  %-26s %s  -> ", start.UTC().Format(domain.TimeLayout), env.Type, env.ID)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, f.cfg.ForwardTo, bytes.NewReader(ev))
	if err != nil {
		fmt.Fprintln(f.cfg.Out, line+"error: "+err.Error())
		return
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", domain.WebhookUserAgent)
	f.sign.Headers(env.ID, 1, start, ev, req.Header.Add)
	resp, err := f.cfg.Client.Do(req)
	if err != nil {
		fmt.Fprintln(f.cfg.Out, line+"error: "+err.Error())
		return
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	fmt.Fprintf(f.cfg.Out, "%s%s (%dms)\n", line, resp.Status, time.Since(start).Milliseconds())
}

// save writes the state file whole (a temporary file renamed over it), so
// a crash leaves the old state or the new one.
func (f *forwarder) save() error {
	if err := os.MkdirAll(filepath.Dir(f.path), 0o700); err != nil {
		return err
	}
	data, _ := json.MarshalIndent(f.state, "", "  ")
	tmp := f.path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, f.path)
}
