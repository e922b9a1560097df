package domain

import (
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// ChurchCatalogue is the aggregate id under which a partner's church
// imports are appended, and under which earlier builds appended changes
// too. What keeps external_id unique within a partner is a reservation per
// external id, outside this package: the decisions below take its answer
// as externalIDUsed.
const ChurchCatalogue = "churches"

// ChurchChanges is the aggregate id under which a partner's changes to its
// churches (renames, external ids, archiving) are appended: each is
// decided on the church as every change before it left it, so they take
// turns among themselves, while imports, which only add churches, never
// wait for them or make them decide again.
const ChurchChanges = "church_changes"

// Limits on church imports.
const (
	MaxImportRows     = 1000
	MaxChurchName     = 200
	MaxChurchExternal = 200
)

// Church is a church as partners see it. An archived church stays readable
// but takes no new donor sessions.
type Church struct {
	ID         string     `json:"id"`
	Name       string     `json:"name"`
	ExternalID *string    `json:"external_id"`
	CreatedAt  time.Time  `json:"created_at"`
	ArchivedAt *time.Time `json:"archived_at,omitempty"`
}

// ImportRow is one row of an import request after its JSON types were
// checked. A row whose JSON was already unusable arrives with Err set.
type ImportRow struct {
	Name       string
	ExternalID *string
	Err        *Error
}

// ImportedChurch is a created row inside a ChurchesImported event.
type ImportedChurch struct {
	Index      int     `json:"index"`
	ID         string  `json:"id"`
	Name       string  `json:"name"`
	ExternalID *string `json:"external_id,omitempty"`
}

// RejectedRow is a rejected row inside a ChurchesImported event, kept so the
// import's answer can be rebuilt from the ledger alone.
type RejectedRow struct {
	Index  int    `json:"index"`
	Code   Code   `json:"code"`
	Detail string `json:"detail"`
}

// ChurchesImported records one import batch: the churches it created and the
// rows it rejected.
type ChurchesImported struct {
	Rows     int              `json:"rows"`
	Created  []ImportedChurch `json:"created"`
	Rejected []RejectedRow    `json:"rejected"`
}

func (*ChurchesImported) EventType() string { return "church.imported" }

// ChurchUpdated records a church's new name and external id (nil when it
// has none), both as they are after the change.
type ChurchUpdated struct {
	ChurchID   string  `json:"church_id"`
	Name       string  `json:"name"`
	ExternalID *string `json:"external_id,omitempty"`
}

func (*ChurchUpdated) EventType() string { return "church.updated" }

// ChurchArchived records that a church takes no new donor sessions.
type ChurchArchived struct {
	ChurchID string `json:"church_id"`
}

func (*ChurchArchived) EventType() string { return "church.archived" }

func init() {
	register[ChurchesImported](false, "A partner imported a batch of churches.")
	register[ChurchUpdated](false, "A partner renamed a church or changed its external_id.")
	register[ChurchArchived](false, "A partner archived a church; it takes no new donor sessions.")
}

// RowResult is the outcome of one import row.
type RowResult struct {
	Index  int
	Church *Church
	Err    *Error
}

// Results lists every row's outcome in input order.
func (c *ChurchesImported) Results(at time.Time) []RowResult {
	out := make([]RowResult, c.Rows)
	for i := range out {
		out[i].Index = i
	}
	for _, r := range c.Created {
		out[r.Index].Church = &Church{ID: r.ID, Name: r.Name, ExternalID: r.ExternalID, CreatedAt: at}
	}
	for _, r := range c.Rejected {
		out[r.Index].Err = &Error{Kind: KindInvalid, Code: r.Code, Detail: r.Detail}
	}
	return out
}

// ImportChurches decides an import batch. externalIDUsed reports whether the
// partner already has a church with that external id. A bad row never fails
// the batch; it is rejected on its own. The event is nil when no row was
// created, since nothing changed.
func ImportChurches(partnerID string, rows []ImportRow, externalIDUsed func(string) bool, now time.Time) (*Event, []RowResult, error) {
	if len(rows) > MaxImportRows {
		return nil, nil, ProblemBatchTooLarge.New("An import holds at most %d churches; this one has %d.", MaxImportRows, len(rows))
	}
	payload := &ChurchesImported{Rows: len(rows), Created: []ImportedChurch{}, Rejected: []RejectedRow{}}
	seen := map[string]bool{}
	for i, row := range rows {
		err := row.Err
		if err == nil {
			err = validateChurchRow(&row, seen, externalIDUsed)
		}
		if err != nil {
			payload.Rejected = append(payload.Rejected, RejectedRow{Index: i, Code: err.Code, Detail: err.Detail})
			continue
		}
		if row.ExternalID != nil {
			seen[*row.ExternalID] = true
		}
		payload.Created = append(payload.Created, ImportedChurch{Index: i, ID: NewSortedID(PrefixChurch, partnerID), Name: row.Name, ExternalID: row.ExternalID})
	}
	ev := NewEvent(partnerID, ChurchCatalogue, "", now, payload)
	results := payload.Results(ev.OccurredAt)
	if len(payload.Created) == 0 {
		return nil, results, nil
	}
	return &ev, results, nil
}

func validateChurchRow(row *ImportRow, seen map[string]bool, used func(string) bool) *Error {
	row.Name = strings.TrimSpace(row.Name)
	if detail := checkChurchName(row.Name); detail != "" {
		return ProblemInvalidRow.New("%s", detail)
	}
	if row.ExternalID == nil {
		return nil
	}
	ext := *row.ExternalID
	if detail := checkChurchExternalID(ext); detail != "" {
		return ProblemInvalidRow.New("%s", detail)
	}
	switch {
	case seen[ext]:
		return ProblemExternalIDTaken.New("external_id %q appears earlier in this batch", ext)
	case used(ext):
		return ProblemExternalIDTaken.New("external_id %q is already used by another church", ext)
	}
	return nil
}

// checkChurchName says what is wrong with a church name (trimmed), or "".
func checkChurchName(name string) string {
	switch {
	case name == "":
		return "name is required and must not be blank"
	case utf8.RuneCountInString(name) > MaxChurchName:
		return fmt.Sprintf("name must be at most %d characters", MaxChurchName)
	case hasControl(name):
		return "name must not contain control characters"
	}
	return ""
}

// checkChurchExternalID says what is wrong with an external id, or "".
func checkChurchExternalID(ext string) string {
	switch {
	case ext == "" || utf8.RuneCountInString(ext) > MaxChurchExternal:
		return fmt.Sprintf("external_id must be 1 to %d characters", MaxChurchExternal)
	case hasControl(ext):
		return "external_id must not contain control characters"
	}
	return ""
}

// ChurchPatch is a change to a church: a nil field stays as it is;
// ClearExternalID removes the external id.
type ChurchPatch struct {
	Name            *string
	ExternalID      *string
	ClearExternalID bool
}

// UpdateChurch decides a change to church c under the rules of an import
// row: a name that is not blank, at most MaxChurchName characters, no
// control characters; an external id unique among the partner's churches
// (externalIDUsed reports one in use). An archived church cannot be
// changed. The event is nil when nothing changes; the church returned is
// the church after the change.
func UpdateChurch(partnerID string, c Church, p ChurchPatch, externalIDUsed func(string) bool, now time.Time) (*Event, Church, error) {
	if c.ArchivedAt != nil {
		return nil, c, ProblemChurchArchived.New("Church %s is archived and cannot be changed.", c.ID)
	}
	var v Validation
	next := c
	if p.Name != nil {
		next.Name = strings.TrimSpace(*p.Name)
		if detail := checkChurchName(next.Name); detail != "" {
			v.Add("name", "%s", strings.TrimPrefix(detail, "name "))
		}
	}
	switch {
	case p.ClearExternalID:
		next.ExternalID = nil
	case p.ExternalID != nil:
		ext := *p.ExternalID
		next.ExternalID = &ext
		if detail := checkChurchExternalID(ext); detail != "" {
			v.Add("external_id", "%s", strings.TrimPrefix(detail, "external_id "))
		}
	}
	if err := v.Err(); err != nil {
		return nil, c, err
	}
	if next.Name == c.Name && equalOptional(next.ExternalID, c.ExternalID) {
		return nil, c, nil
	}
	if next.ExternalID != nil && !equalOptional(next.ExternalID, c.ExternalID) && externalIDUsed(*next.ExternalID) {
		return nil, c, ProblemExternalIDTaken.New("external_id %q is already used by another church", *next.ExternalID)
	}
	ev := NewEvent(partnerID, ChurchChanges, "", now, &ChurchUpdated{ChurchID: c.ID, Name: next.Name, ExternalID: next.ExternalID})
	return &ev, next, nil
}

// ArchiveChurch decides archiving church c. Archiving an archived church
// changes nothing (a nil event).
func ArchiveChurch(partnerID string, c Church, now time.Time) (*Event, Church) {
	if c.ArchivedAt != nil {
		return nil, c
	}
	ev := NewEvent(partnerID, ChurchChanges, "", now, &ChurchArchived{ChurchID: c.ID})
	at := ev.OccurredAt
	c.ArchivedAt = &at
	return &ev, c
}

func equalOptional(a, b *string) bool {
	return (a == nil && b == nil) || (a != nil && b != nil && *a == *b)
}

func hasControl(s string) bool {
	return strings.IndexFunc(s, unicode.IsControl) >= 0
}
