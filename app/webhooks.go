package app

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/eventlog"
	"github.com/partnergiving/giving/projections"
)

// Webhooks is what the endpoint use cases need from the dispatcher: the
// same guard and sender serve the API and the deliveries.
type Webhooks interface {
	// CheckURL refuses, as a validation error naming url, a receiver
	// address the stack will not connect to.
	CheckURL(ctx context.Context, rawURL string) error
	// TestDelivery sends a signed webhook_endpoint.test envelope to the
	// endpoint at once and logs the attempt.
	TestDelivery(ctx context.Context, ep projections.WebhookEndpoint) (domain.DeliveryAttempt, error)
	// Resend queues one attempt of a stored public event (ledger sequence
	// seq) to the endpoint and returns the id its attempt will be logged
	// under.
	Resend(ctx context.Context, ep projections.WebhookEndpoint, seq uint64, eventID, eventType string) (string, error)
	// Recover stores a new recovery and has it run.
	Recover(ctx context.Context, r domain.WebhookRecovery) error
	// Recovery returns one of the partner's recoveries.
	Recovery(ctx context.Context, partner, id string) (domain.WebhookRecovery, bool, error)
}

// CreatedEndpoint is a new endpoint and its signing secret, shown once.
type CreatedEndpoint struct {
	Endpoint domain.WebhookEndpoint
	Secret   string
}

// EndpointSettings are what a partner gives a new endpoint.
type EndpointSettings struct {
	URL         string
	EventTypes  []string
	Description string
	Metadata    map[string]string
	// Scheme is domain.SchemeHMAC (the default when empty) or
	// domain.SchemeEd25519.
	Scheme string
}

// CreateEndpoint registers a receiver. Its secret (and, for an ed25519
// endpoint, its private key) is generated here and sealed before it
// reaches the ledger.
func (s *Service) CreateEndpoint(ctx context.Context, partner string, n EndpointSettings) (CreatedEndpoint, error) {
	s = s.as("app.CreateEndpoint")
	u, types, err := domain.ValidateWebhookEndpoint(n.URL, n.EventTypes)
	if err != nil {
		return CreatedEndpoint{}, err
	}
	if n.Scheme == "" {
		n.Scheme = domain.SchemeHMAC
	}
	if err := domain.ValidateSignatureScheme(n.Scheme); err != nil {
		return CreatedEndpoint{}, err
	}
	if err := s.webhooks.CheckURL(ctx, u); err != nil {
		return CreatedEndpoint{}, err
	}
	// The limit spans the partner's endpoints, each its own aggregate:
	// creates take turns per partner, and each counts once the projections
	// hold every endpoint event of the partner in the ledger.
	release, err := s.ledger.Turn(ctx, s.endpointEvents(partner))
	if err != nil {
		return CreatedEndpoint{}, err
	}
	defer release()
	id := domain.NewID(domain.PrefixEndpoint)
	sealed, key := s.newCredentials(id, n.Scheme)
	out, err := s.run(ctx, eventlog.Command{
		Partner: partner, Aggregate: id, New: true,
		Decide: func(ctx context.Context, h eventlog.History) (*domain.Event, error) {
			// Counted here, after a crash-takeover recall found nothing:
			// a recalled creation answers as it did, limit or not.
			if err := s.endpointRoom(ctx, partner); err != nil {
				return nil, err
			}
			ep := domain.Fold[domain.WebhookEndpoint](h.Events)
			ev, err := domain.CreateWebhookEndpoint(&ep, domain.NewWebhookEndpoint{
				ID: id, PartnerID: partner, URL: u, EventTypes: types, SealedSecret: sealed,
				Description: n.Description, Metadata: n.Metadata, SigningKey: key,
			}, time.Now())
			return &ev, err
		},
	})
	if err != nil {
		return CreatedEndpoint{}, err
	}
	// Answer from the stored event, so that a request recalled after a crash
	// shows the endpoint and secret that were actually created.
	ev, err := out.Record.Event()
	if err != nil {
		return CreatedEndpoint{}, err
	}
	ep := domain.Fold[domain.WebhookEndpoint]([]domain.Event{ev})
	secret, err := s.webhookSeal.Open(ep.SealedSecret, []byte(ep.ID))
	if err != nil {
		return CreatedEndpoint{}, err
	}
	return CreatedEndpoint{Endpoint: ep, Secret: string(secret)}, nil
}

// newCredentials generates and seals an endpoint's credentials for scheme:
// a whsec_ secret, and for ed25519 a key pair, its whsk_ private key
// sealed for the endpoint like the secret.
func (s *Service) newCredentials(id, scheme string) ([]byte, *domain.SealedSigningKey) {
	sealed := s.webhookSeal.Seal([]byte(domain.GenerateWebhookSecret()), []byte(id))
	if scheme != domain.SchemeEd25519 {
		return sealed, nil
	}
	return sealed, s.newSigningKey(id)
}

func (s *Service) newSigningKey(id string) *domain.SealedSigningKey {
	private, public := domain.GenerateSigningKey()
	return &domain.SealedSigningKey{Sealed: s.webhookSeal.Seal([]byte(private), []byte(id)), PublicKey: public}
}

// UpdateEndpoint changes one of the partner's endpoints: its address (under
// the same rules as at creation), event types, description, metadata or
// signature scheme. The dispatcher uses the new address and types for
// every attempt not yet made. A change to ed25519 makes the endpoint's key
// pair here; its whsec_ secret stays as it is.
func (s *Service) UpdateEndpoint(ctx context.Context, partner, id string, c domain.WebhookEndpointChange) (projections.WebhookEndpoint, error) {
	s = s.as("app.UpdateEndpoint")
	if c.URL != nil {
		u, _, err := domain.ValidateWebhookEndpoint(*c.URL, []string{domain.AllEventTypes})
		if err != nil {
			return projections.WebhookEndpoint{}, err
		}
		if err := s.webhooks.CheckURL(ctx, u); err != nil {
			return projections.WebhookEndpoint{}, err
		}
	}
	if c.Scheme != nil && *c.Scheme == domain.SchemeEd25519 && domain.ValidID(domain.PrefixEndpoint, id) {
		c.SigningKey = s.newSigningKey(id)
	}
	return s.changeEndpoint(ctx, partner, id, func(ep *domain.WebhookEndpoint) (*domain.Event, error) {
		return domain.UpdateWebhookEndpoint(ep, id, c, time.Now())
	})
}

// RotatedSecret is the answer to a rotation: the endpoint as it now is, its
// new secret (shown once) and until when the previous one signs.
type RotatedSecret struct {
	Endpoint          projections.WebhookEndpoint
	Secret            string
	PreviousExpiresAt time.Time
}

// RotateSecret replaces an endpoint's secret (and key pair, for an ed25519
// endpoint) with a new one; the current one keeps signing beside it for
// overlap. The public webhook_endpoint.secret_rotated tells the partner's
// endpoints and the feed.
func (s *Service) RotateSecret(ctx context.Context, partner, id string, overlap time.Duration) (RotatedSecret, error) {
	s = s.as("app.RotateSecret")
	if !domain.ValidID(domain.PrefixEndpoint, id) {
		return RotatedSecret{}, domain.NotFound("webhook endpoint", id)
	}
	out, err := s.run(ctx, eventlog.Command{
		Partner: partner, Aggregate: id,
		Decide: func(_ context.Context, h eventlog.History) (*domain.Event, error) {
			ep := domain.Fold[domain.WebhookEndpoint](h.Events)
			sealed, key := s.newCredentials(id, ep.SignatureScheme())
			ev, err := domain.RotateWebhookSecret(&ep, id, sealed, key, overlap, time.Now())
			return &ev, err
		},
	})
	if err != nil {
		return RotatedSecret{}, err
	}
	// Answer from the stored fact, so that a request recalled after a
	// crash shows the secret that was actually stored.
	ev, err := out.Record.Event()
	if err != nil {
		return RotatedSecret{}, err
	}
	issued, ok := ev.Internal.(*domain.WebhookSecretIssued)
	if !ok {
		return RotatedSecret{}, fmt.Errorf("rotate %s: the stored event carries no new secret", id)
	}
	secret, err := s.webhookSeal.Open(issued.SealedSecret, []byte(id))
	if err != nil {
		return RotatedSecret{}, err
	}
	ep, err := s.Endpoint(partner, id)
	return RotatedSecret{Endpoint: ep, Secret: string(secret), PreviousExpiresAt: issued.PreviousExpiresAt}, err
}

// endpointEvents matches every event about the partner's endpoints.
func (s *Service) endpointEvents(partner string) string {
	return s.ledger.Subjects().Noun(partner, "webhook_endpoint")
}

// endpointRoom refuses a new endpoint when the partner has
// MaxWebhookEndpoints. The caller holds the partner's endpoint turn, so in
// this process no create runs between the count and the append; the count
// waits until the projections hold the newest endpoint event the ledger has
// for the partner, so it includes the creates of other instances that came
// before. Two instances creating a partner's last endpoint at the same
// moment can still both pass: the ledger's check is per aggregate, and each
// endpoint is its own.
func (s *Service) endpointRoom(ctx context.Context, partner string) error {
	last, err := s.ledger.LastOf(ctx, s.endpointEvents(partner))
	if err != nil {
		return err
	}
	if err := s.waitApplied(ctx, last); err != nil {
		return err
	}
	existing, _, _, err := s.store.WebhookEndpoints(partner, nil, 0)
	if err != nil {
		return err
	}
	if len(existing) >= domain.MaxWebhookEndpoints {
		return domain.ProblemConflict.New("A partner has at most %d webhook endpoints; delete one first.", domain.MaxWebhookEndpoints)
	}
	return nil
}

// DeleteEndpoint removes an endpoint: no delivery starts for it afterwards,
// retries included.
func (s *Service) DeleteEndpoint(ctx context.Context, partner, id string) error {
	s = s.as("app.DeleteEndpoint")
	if !domain.ValidID(domain.PrefixEndpoint, id) {
		return domain.NotFound("webhook endpoint", id)
	}
	_, err := s.run(ctx, eventlog.Command{
		Partner: partner, Aggregate: id,
		Decide: func(_ context.Context, h eventlog.History) (*domain.Event, error) {
			ep := domain.Fold[domain.WebhookEndpoint](h.Events)
			ev, err := domain.DeleteWebhookEndpoint(&ep, id, time.Now())
			return &ev, err
		},
	})
	return err
}

// DisableEndpoint disables one of the partner's endpoints: it receives
// nothing new until enabled, and its pending retries are dropped. A manual
// disable emits no public event. Disabling a disabled endpoint keeps its
// reason.
func (s *Service) DisableEndpoint(ctx context.Context, partner, id string) (projections.WebhookEndpoint, error) {
	s = s.as("app.DisableEndpoint")
	return s.changeEndpoint(ctx, partner, id, func(ep *domain.WebhookEndpoint) (*domain.Event, error) {
		return domain.DisableWebhookEndpoint(ep, id, time.Now())
	})
}

// EnableEndpoint enables one of the partner's endpoints: it receives the
// events that happen from now on. What happened while it was disabled is
// not replayed; RecoverEndpoint does that.
func (s *Service) EnableEndpoint(ctx context.Context, partner, id string) (projections.WebhookEndpoint, error) {
	s = s.as("app.EnableEndpoint")
	return s.changeEndpoint(ctx, partner, id, func(ep *domain.WebhookEndpoint) (*domain.Event, error) {
		return domain.EnableWebhookEndpoint(ep, id, time.Now())
	})
}

// FailEndpoint disables an endpoint whose every attempt failed for the
// configured span, with reason failing, and emits the public
// webhook_endpoint.disabled event to the partner's other endpoints and the
// feed. The dispatcher calls it; an endpoint already disabled or deleted is
// left as it is.
func (s *Service) FailEndpoint(ctx context.Context, partner, id string) error {
	s = s.as("app.FailEndpoint")
	_, err := s.changeEndpoint(ctx, partner, id, func(ep *domain.WebhookEndpoint) (*domain.Event, error) {
		return domain.FailWebhookEndpoint(ep, time.Now()), nil
	})
	return err
}

// changeEndpoint runs decide on one of the partner's endpoints and answers
// with the endpoint as the decision left it (change).
func (s *Service) changeEndpoint(ctx context.Context, partner, id string, decide func(*domain.WebhookEndpoint) (*domain.Event, error)) (projections.WebhookEndpoint, error) {
	if !domain.ValidID(domain.PrefixEndpoint, id) {
		return projections.WebhookEndpoint{}, domain.NotFound("webhook endpoint", id)
	}
	c, err := change(ctx, s, partner, id, decide)
	if err != nil {
		return projections.WebhookEndpoint{}, err
	}
	if err := s.waitApplied(ctx, c.Seen); err != nil {
		return projections.WebhookEndpoint{}, err
	}
	// Its place in the list never changes: the projections' copy is the
	// request's.
	ep, err := s.Endpoint(partner, id)
	if err != nil {
		return projections.WebhookEndpoint{}, err
	}
	ep.WebhookEndpoint = c.State
	return ep, nil
}

// Endpoint is one of the partner's endpoints, or a not-found error.
func (s *Service) Endpoint(partner, id string) (projections.WebhookEndpoint, error) {
	ep, ok, err := s.store.WebhookEndpoint(partner, id)
	if err != nil {
		return ep, err
	}
	if !ok {
		return ep, domain.NotFound("webhook endpoint", id)
	}
	return ep, nil
}

// TestEndpoint sends a test delivery to one of the partner's endpoints at
// once, through the same signer and sender as real deliveries.
func (s *Service) TestEndpoint(ctx context.Context, partner, id string) (domain.DeliveryAttempt, error) {
	ep, err := s.Endpoint(partner, id)
	if err != nil {
		return domain.DeliveryAttempt{}, err
	}
	return s.webhooks.TestDelivery(ctx, ep)
}

// ResendEvent sends one of the partner's public events to one of its
// endpoints again, as a single new attempt through the same signer and
// sender as every delivery, and returns the attempt's id (its line in the
// deliveries list once made). Another partner's event or endpoint is not
// found; an event type the endpoint does not subscribe to is refused; a
// disabled endpoint must be enabled first.
func (s *Service) ResendEvent(ctx context.Context, partner, endpointID, eventID string) (string, error) {
	ep, err := s.Endpoint(partner, endpointID)
	if err != nil {
		return "", err
	}
	if !ep.Enabled() {
		return "", domain.ProblemEndpointDisabled.New("Webhook endpoint %s is disabled; enable it first.", ep.ID)
	}
	seq, data, err := s.publicEvent(ctx, partner, eventID)
	if err != nil {
		return "", err
	}
	env, err := domain.ReadEnvelopeHeader(data)
	if err != nil {
		return "", fmt.Errorf("event %s: %w", eventID, err)
	}
	if !ep.Subscribes(env.Type) {
		return "", domain.ProblemNotSubscribed.New("Webhook endpoint %s does not subscribe to %s events.", ep.ID, env.Type)
	}
	return s.webhooks.Resend(ctx, ep, seq, eventID, env.Type)
}

// recoverySkew is how much earlier than its since a recovery starts reading
// the feed: occurred_at follows ledger order only up to the skew between
// the instances' clocks.
const recoverySkew = time.Minute

// RecoverEndpoint starts re-delivering to one of the partner's endpoints,
// in ledger order, every event it subscribes to within a range: from since
// (at most MaxRecoveryAge ago) or after a feed position, up to until or to
// the end of the ledger now (later events reach it the usual way). The
// range is counted here, so the recovery's total is known at once.
func (s *Service) RecoverEndpoint(ctx context.Context, partner, id string, rg domain.RecoveryRange) (domain.WebhookRecovery, error) {
	ep, err := s.Endpoint(partner, id)
	if err != nil {
		return domain.WebhookRecovery{}, err
	}
	if !ep.Enabled() {
		return domain.WebhookRecovery{}, domain.ProblemEndpointDisabled.New("Webhook endpoint %s is disabled; enable it first.", ep.ID)
	}
	now := time.Now().UTC()
	from, err := domain.ValidateRecoveryRange(rg, now)
	if err != nil {
		return domain.WebhookRecovery{}, err
	}
	var after uint64
	if rg.SinceCursor != nil {
		after = *rg.SinceCursor
	}
	last, err := s.checkFeedPosition(ctx, after)
	if err != nil {
		return domain.WebhookRecovery{}, err
	}
	r := domain.WebhookRecovery{
		ID: domain.NewID(domain.PrefixRecovery), PartnerID: partner, EndpointID: ep.ID, UpTo: last, From: from,
		Status: domain.RecoveryRunning, CreatedAt: now, UpdatedAt: now,
	}
	if !slices.Contains(ep.EventTypes, domain.AllEventTypes) {
		r.Types = ep.EventTypes
	}
	if rg.Until != nil {
		r.Until = rg.Until.UTC()
	}
	if rg.SinceCursor != nil {
		r.After = *rg.SinceCursor
	} else if r.After, err = s.store.FeedPositionAt(partner, from.Add(-recoverySkew)); err != nil {
		return domain.WebhookRecovery{}, err
	}
	r.Position = r.After
	if r.Total, err = s.countRecovery(&r); err != nil {
		return domain.WebhookRecovery{}, err
	}
	if r.Total == 0 {
		r.Status = domain.RecoveryCompleted
	}
	return r, s.webhooks.Recover(ctx, r)
}

func (s *Service) countRecovery(r *domain.WebhookRecovery) (int, error) {
	n, after := 0, r.After
	for {
		events, reached, done, err := s.store.RecoveryPage(r, after, 1000)
		if err != nil {
			return 0, err
		}
		n, after = n+len(events), reached
		if done {
			return n, nil
		}
	}
}

// Recovery is one of the partner's recoveries of one of its endpoints.
func (s *Service) Recovery(ctx context.Context, partner, endpointID, id string) (domain.WebhookRecovery, error) {
	if _, err := s.Endpoint(partner, endpointID); err != nil {
		return domain.WebhookRecovery{}, err
	}
	if !domain.ValidID(domain.PrefixRecovery, id) {
		return domain.WebhookRecovery{}, domain.NotFound("recovery", id)
	}
	r, ok, err := s.webhooks.Recovery(ctx, partner, id)
	if err != nil {
		return r, err
	}
	if !ok || r.EndpointID != endpointID {
		return domain.WebhookRecovery{}, domain.NotFound("recovery", id)
	}
	return r, nil
}

// DeliveryFilter is what a page of the deliveries list holds.
type DeliveryFilter struct {
	// Outcome keeps only succeeded attempts, or only failed ones (timeouts
	// and network errors included); empty keeps every attempt.
	Outcome string
	// After is the id of the last attempt of the previous page; empty for
	// the first page.
	After string
	Limit int
}

// The outcomes the deliveries list filters on.
const (
	OutcomeSucceeded = "succeeded"
	OutcomeFailed    = "failed"
)

// Deliveries lists a page of the last attempts to deliver to one of the
// partner's endpoints, newest first, and whether more follow. A page after
// an attempt that has since been dropped from the log is empty: every
// attempt older than it was dropped too.
func (s *Service) Deliveries(ctx context.Context, partner, id string, f DeliveryFilter) ([]domain.DeliveryAttempt, bool, error) {
	ep, err := s.Endpoint(partner, id)
	if err != nil {
		return nil, false, err
	}
	all, err := s.attempts.Last(ctx, ep.PartnerID, ep.ID)
	if err != nil {
		return nil, false, err
	}
	if f.After != "" {
		i := slices.IndexFunc(all, func(a domain.DeliveryAttempt) bool { return a.ID == f.After })
		if i < 0 {
			return []domain.DeliveryAttempt{}, false, nil
		}
		all = all[i+1:]
	}
	out := make([]domain.DeliveryAttempt, 0, min(len(all), f.Limit))
	for _, a := range all {
		succeeded := a.Outcome == domain.DeliverySucceeded
		if (f.Outcome == OutcomeSucceeded && !succeeded) || (f.Outcome == OutcomeFailed && succeeded) {
			continue
		}
		if len(out) == f.Limit {
			return out, true, nil
		}
		out = append(out, a)
	}
	return out, false, nil
}
