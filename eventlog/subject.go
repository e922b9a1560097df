package eventlog

import (
	"fmt"
	"strings"

	"github.com/partnergiving/giving/domain"
)

const subjectRoot = "ledger"

// Subjects builds and parses the ledger subjects of one environment.
type Subjects struct {
	env string
}

func (s Subjects) prefix() string { return subjectRoot + "." + s.env + "." }

// All matches every event of the environment.
func (s Subjects) All() string { return s.prefix() + ">" }

// Event is the subject an event is stored under.
func (s Subjects) Event(e domain.Event) (string, error) {
	spec, ok := domain.EventTypeSpec(e.Type)
	if !ok {
		return "", fmt.Errorf("subject: unknown event type %q", e.Type)
	}
	if spec.TestOnly {
		return "", fmt.Errorf("subject: %s is never stored", e.Type)
	}
	if !SafeToken(e.PartnerID) || !SafeToken(e.AggregateID) {
		return "", fmt.Errorf("subject: unsafe partner %q or aggregate %q", e.PartnerID, e.AggregateID)
	}
	vis := "int"
	if spec.Public {
		vis = "pub"
	}
	return s.prefix() + e.PartnerID + "." + e.AggregateID + "." + vis + "." + e.Type, nil
}

// Aggregate matches every event of one aggregate.
func (s Subjects) Aggregate(partner, aggregate string) string {
	return s.prefix() + partner + "." + aggregate + ".>"
}

// Public matches one partner's public events of one type, or of every type
// when eventType is empty.
func (s Subjects) Public(partner, eventType string) string {
	if eventType == "" {
		return s.prefix() + partner + ".*.pub.>"
	}
	return s.prefix() + partner + ".*.pub." + eventType
}

// Noun matches one partner's events about one noun, every verb: the
// "webhook_endpoint" noun covers webhook_endpoint.created and .deleted.
func (s Subjects) Noun(partner, noun string) string {
	return s.prefix() + partner + ".*.*." + noun + ".*"
}

// OfType matches every partner's events of one type.
func (s Subjects) OfType(eventType string) string {
	spec, _ := domain.EventTypeSpec(eventType)
	vis := "int"
	if spec.Public {
		vis = "pub"
	}
	return s.prefix() + "*.*." + vis + "." + eventType
}

// parsed is what a subject says about its event.
type parsed struct {
	Partner, Aggregate, Type string
	Public                   bool
}

func (s Subjects) parse(subject string) (parsed, error) {
	// Every record read is parsed (by the projector and by the fan-out):
	// the fields are slices of subject, cut without allocating.
	rest, ok := strings.CutPrefix(subject, subjectRoot+".")
	if ok {
		rest, ok = strings.CutPrefix(rest, s.env)
	}
	if ok {
		rest, ok = strings.CutPrefix(rest, ".")
	}
	if !ok {
		return parsed{}, fmt.Errorf("subject %q is not in environment %s", subject, s.env)
	}
	partner, rest, ok1 := strings.Cut(rest, ".")
	aggregate, rest, ok2 := strings.Cut(rest, ".")
	vis, typ, ok3 := strings.Cut(rest, ".")
	noun, verb, ok4 := strings.Cut(typ, ".")
	if !ok1 || !ok2 || !ok3 || !ok4 || strings.Contains(verb, ".") || (vis != "pub" && vis != "int") ||
		partner == "" || aggregate == "" || noun == "" || verb == "" {
		return parsed{}, fmt.Errorf("subject %q is malformed", subject)
	}
	return parsed{Partner: partner, Aggregate: aggregate, Public: vis == "pub", Type: typ}, nil
}

// SafeToken accepts what may stand as one subject token: the ledger's and
// the sibling packages' subjects are built from ids only once they pass.
func SafeToken(s string) bool {
	return s != "" && !strings.ContainsAny(s, ".*> \t\r\n")
}
