package httpapi

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/gorilla/mux"

	"github.com/partnergiving/giving/app"
	"github.com/partnergiving/giving/domain"
)

// churchView is a church as the API shows it.
type churchView struct {
	ID         string  `json:"id"`
	Name       string  `json:"name"`
	ExternalID *string `json:"external_id"`
	Status     string  `json:"status"`
	CreatedAt  string  `json:"created_at"`
	ArchivedAt *string `json:"archived_at"`
}

func viewChurch(c domain.Church) churchView {
	v := churchView{ID: c.ID, Name: c.Name, ExternalID: c.ExternalID, Status: "active", CreatedAt: domain.FormatTime(c.CreatedAt)}
	if c.ArchivedAt != nil {
		at := domain.FormatTime(*c.ArchivedAt)
		v.Status, v.ArchivedAt = "archived", &at
	}
	return v
}

type importRequest struct {
	Churches *[]json.RawMessage `json:"churches"`
}

type importRow struct {
	Name       *string `json:"name"`
	ExternalID *string `json:"external_id"`
}

type rowError struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Detail string `json:"detail"`
}

type rowResult struct {
	Index  int         `json:"index"`
	Status string      `json:"status"`
	Church *churchView `json:"church,omitempty"`
	Error  *rowError   `json:"error,omitempty"`
}

// importChurches creates a batch of churches. A bad row is rejected on its
// own and never fails the batch; the answer has one result per row, in order.
func (s *Server) importChurches(w http.ResponseWriter, r *http.Request, claimed *app.Request) {
	var req importRequest
	if err := decodeJSON(r, &req); err != nil {
		writeError(w, r, err)
		return
	}
	if req.Churches == nil {
		var v domain.Validation
		v.Add("churches", "is required: an array of {name, external_id} objects")
		writeError(w, r, v.Err())
		return
	}
	raw := *req.Churches
	if len(raw) > domain.MaxImportRows {
		writeProblem(w, r, domain.ProblemBatchTooLarge, "An import holds at most "+strconv.Itoa(domain.MaxImportRows)+" churches; this one has "+strconv.Itoa(len(raw))+".", nil)
		return
	}
	results, err := s.app.Under(claimed).ImportChurches(r.Context(), partnerID(r), decodeImportRows(raw))
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"results": viewRowResults(results)})
}

// decodeImportRows types each row on its own, so a row with the wrong JSON
// shape is rejected without failing its neighbours.
func decodeImportRows(raw []json.RawMessage) []domain.ImportRow {
	rows := make([]domain.ImportRow, len(raw))
	for i, item := range raw {
		var row importRow
		if err := decodeStrict(item, &row); err != nil {
			rows[i].Err = domain.ProblemInvalidRow.New("%s", rowDecodeDetail(err))
			continue
		}
		if row.Name == nil {
			rows[i].Err = domain.ProblemInvalidRow.New("name is required")
			continue
		}
		rows[i].Name, rows[i].ExternalID = *row.Name, row.ExternalID
	}
	return rows
}

func rowDecodeDetail(err error) string {
	de, ok := err.(*domain.Error)
	if !ok {
		return "the row is not a valid JSON object"
	}
	if len(de.Fields) > 0 {
		return de.Fields[0].Field + " " + de.Fields[0].Detail
	}
	return "the row must be a JSON object with a string name and an optional string external_id"
}

func viewRowResults(results []domain.RowResult) []rowResult {
	out := make([]rowResult, len(results))
	for i, res := range results {
		out[i] = rowResult{Index: res.Index}
		if res.Church != nil {
			v := viewChurch(*res.Church)
			out[i].Status, out[i].Church = "created", &v
			continue
		}
		p, ok := domain.ProblemFor(res.Err.Code)
		if !ok {
			p = domain.ProblemInvalidRow
		}
		out[i].Status = "rejected"
		out[i].Error = &rowError{Type: p.TypeURI(), Title: p.Title, Detail: res.Err.Detail}
	}
	return out
}

func (s *Server) getChurch(w http.ResponseWriter, r *http.Request) {
	id := mux.Vars(r)["id"]
	c, ok, err := s.store.Church(partnerID(r), id)
	if err != nil {
		writeError(w, r, err)
		return
	}
	if !ok {
		writeError(w, r, domain.NotFound("church", id))
		return
	}
	writeJSON(w, http.StatusOK, viewChurch(c))
}

// listPage is the shape of every cursor-paginated list.
type listPage[T any] struct {
	Data       []T     `json:"data"`
	HasMore    bool    `json:"has_more"`
	NextCursor *string `json:"next_cursor"`
}

func (s *Server) listChurches(w http.ResponseWriter, r *http.Request) {
	pid := partnerID(r)
	servePage(s, w, r, domain.CursorChurches, func(after []byte, limit int) ([]domain.Church, []byte, bool, error) {
		return s.store.Churches(pid, after, limit)
	}, viewChurch)
}

// servePage answers one page of a cursor-paginated list: it reads `limit`
// (1 to 100, default 50) and `cursor`, fetches the items after the cursor's
// position, and wraps the last one's position as next_cursor when more
// follow. A cursor of another list or partner, or an altered one, is 400.
func servePage[M, V any](s *Server, w http.ResponseWriter, r *http.Request, kind domain.CursorKind,
	fetch func(after []byte, limit int) ([]M, []byte, bool, error), view func(M) V) {
	pid := partnerID(r)
	limit, err := queryLimit(r, 50, 100)
	if err != nil {
		writeError(w, r, err)
		return
	}
	var after []byte
	if c := r.URL.Query().Get("cursor"); c != "" {
		if after, err = s.cursors.Decode(kind, pid, c); err != nil {
			writeProblem(w, r, domain.ProblemInvalidCursor, "", nil)
			return
		}
	}
	items, last, more, err := fetch(after, limit)
	if err != nil {
		writeError(w, r, err)
		return
	}
	page := listPage[V]{Data: make([]V, len(items)), HasMore: more}
	for i, it := range items {
		page.Data[i] = view(it)
	}
	if more {
		next := s.cursors.Encode(kind, pid, last)
		page.NextCursor = &next
	}
	writeJSON(w, http.StatusOK, page)
}

// queryLimit reads the limit query parameter.
func queryLimit(r *http.Request, def, max int) (int, error) {
	s := r.URL.Query().Get("limit")
	if s == "" {
		return def, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > max {
		var v domain.Validation
		v.Add("limit", "must be an integer from 1 to %d", max)
		return 0, v.Err()
	}
	return n, nil
}

type churchPatchRequest struct {
	Name       json.RawMessage `json:"name"`
	ExternalID json.RawMessage `json:"external_id"`
}

// updateChurch renames a church or changes its external id: a member left
// out stays as it is; "external_id": null removes it.
func (s *Server) updateChurch(w http.ResponseWriter, r *http.Request, claimed *app.Request) {
	var req churchPatchRequest
	if err := decodeJSON(r, &req); err != nil {
		writeError(w, r, err)
		return
	}
	var (
		p domain.ChurchPatch
		v domain.Validation
	)
	if req.Name == nil && req.ExternalID == nil {
		v.Add("name", "or external_id is required: send the members to change")
	}
	if req.Name != nil {
		var name string
		if err := json.Unmarshal(req.Name, &name); err != nil || string(req.Name) == "null" {
			v.Add("name", "must be a string")
		}
		p.Name = &name
	}
	switch {
	case req.ExternalID == nil:
	case string(req.ExternalID) == "null":
		p.ClearExternalID = true
	default:
		var ext string
		if err := json.Unmarshal(req.ExternalID, &ext); err != nil {
			v.Add("external_id", "must be a string or null")
		}
		p.ExternalID = &ext
	}
	if err := v.Err(); err != nil {
		writeError(w, r, err)
		return
	}
	c, err := s.app.Under(claimed).UpdateChurch(r.Context(), partnerID(r), mux.Vars(r)["id"], p)
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, viewChurch(c))
}

// archiveChurch archives a church. It takes no body (an empty JSON object
// is accepted).
func (s *Server) archiveChurch(w http.ResponseWriter, r *http.Request, claimed *app.Request) {
	if err := decodeOptional(r, &struct{}{}); err != nil {
		writeError(w, r, err)
		return
	}
	c, err := s.app.Under(claimed).ArchiveChurch(r.Context(), partnerID(r), mux.Vars(r)["id"])
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, viewChurch(c))
}
