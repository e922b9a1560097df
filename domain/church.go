package domain

import (
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// ChurchCatalogue is the aggregate id under which a partner's church imports
// are appended. Serialising imports per partner is what makes external_id
// unique within a partner.
const ChurchCatalogue = "churches"

// Limits on church imports.
const (
	MaxImportRows     = 1000
	MaxChurchName     = 200
	MaxChurchExternal = 200
)

// Church is a church as partners see it.
type Church struct {
	ID         string    `json:"id"`
	Name       string    `json:"name"`
	ExternalID *string   `json:"external_id"`
	CreatedAt  time.Time `json:"created_at"`
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

func init() {
	register[ChurchesImported](false, "A partner imported a batch of churches.")
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
	switch {
	case row.Name == "":
		return ProblemInvalidRow.New("name is required and must not be blank")
	case utf8.RuneCountInString(row.Name) > MaxChurchName:
		return ProblemInvalidRow.New("name must be at most %d characters", MaxChurchName)
	case hasControl(row.Name):
		return ProblemInvalidRow.New("name must not contain control characters")
	}
	if row.ExternalID == nil {
		return nil
	}
	ext := *row.ExternalID
	switch {
	case ext == "" || utf8.RuneCountInString(ext) > MaxChurchExternal:
		return ProblemInvalidRow.New("external_id must be 1 to %d characters", MaxChurchExternal)
	case hasControl(ext):
		return ProblemInvalidRow.New("external_id must not contain control characters")
	case seen[ext]:
		return ProblemExternalIDTaken.New("external_id %q appears earlier in this batch", ext)
	case used(ext):
		return ProblemExternalIDTaken.New("external_id %q is already used by another church", ext)
	}
	return nil
}

func hasControl(s string) bool {
	return strings.IndexFunc(s, unicode.IsControl) >= 0
}
