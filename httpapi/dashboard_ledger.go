package httpapi

import (
	"encoding/csv"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/gorilla/mux"

	"github.com/partnergiving/giving/domain"
)

// The dashboard's pages of the partner's own records: the event feed and
// catalogue, enrollments and their moves, churches and their import. Each
// reads and acts through the API's routes (callAPI).

type feedPageView struct {
	Data       []json.RawMessage `json:"data"`
	NextCursor string            `json:"next_cursor"`
	HasMore    bool              `json:"has_more"`
}

type eventsData struct {
	Events []envelopeOf
	Type   string
	Types  []EventType
	Next   string
}

// dashEvents pages through the feed, oldest first, as GET /v1/events does.
func (s *Server) dashEvents(w http.ResponseWriter, r *http.Request, d *dashRequest) {
	data := eventsData{Type: r.URL.Query().Get("type")}
	q := url.Values{"limit": {"50"}}
	if data.Type != "" {
		q.Set("type", data.Type)
	}
	if c := r.URL.Query().Get("since_cursor"); c != "" {
		q.Set("since_cursor", c)
	}
	var page feedPageView
	var types eventTypesPage
	if !s.dashGet(w, r, d, "/v1/events?"+q.Encode(), &page) || !s.dashGet(w, r, d, "/v1/event_types", &types) {
		return
	}
	data.Types = types.Data
	for _, raw := range page.Data {
		var e envelopeOf
		if err := json.Unmarshal(raw, &e); err != nil {
			s.dashFail(w, r, d, err)
			return
		}
		data.Events = append(data.Events, e)
	}
	if page.HasMore {
		q.Set("since_cursor", page.NextCursor)
		q.Del("limit")
		data.Next = q.Encode()
	}
	s.renderDash(w, r, d, dashView{Page: "events", Title: "Events", Nav: "events", Data: data})
}

type eventData struct {
	Event      envelopeOf
	Envelope   string
	Deliveries []recentAttempt
}

func (s *Server) dashEvent(w http.ResponseWriter, r *http.Request, d *dashRequest) {
	id := mux.Vars(r)["id"]
	a := s.callAPI(r, d, http.MethodGet, "/v1/events/"+url.PathEscape(id), "", nil)
	if !a.ok() {
		s.dashProblem(w, r, d, a.problem())
		return
	}
	data := eventData{Envelope: prettyJSON(a.body)}
	if err := json.Unmarshal(a.body, &data.Event); err != nil {
		s.dashFail(w, r, d, err)
		return
	}
	var ok bool
	if data.Deliveries, ok = s.eventDeliveries(w, r, d, id); ok {
		s.renderDash(w, r, d, dashView{Page: "event", Title: "Event " + data.Event.EventType, Nav: "events", Data: data})
	}
}

// catalogueEntry is one event type with its schema and an example, drawn.
type catalogueEntry struct {
	EventType
	Schema  string
	Example string
}

func (s *Server) dashEventTypes(w http.ResponseWriter, r *http.Request, d *dashRequest) {
	var types eventTypesPage
	if !s.dashGet(w, r, d, "/v1/event_types", &types) {
		return
	}
	out := make([]catalogueEntry, len(types.Data))
	for i, t := range types.Data {
		example, err := t.Example()
		if err != nil {
			s.dashFail(w, r, d, err)
			return
		}
		out[i] = catalogueEntry{EventType: t, Schema: prettyJSON(t.PayloadSchema), Example: prettyJSON(example)}
	}
	s.renderDash(w, r, d, dashView{Page: "event_types", Title: "Event types", Nav: "event-types", Data: out})
}

type enrollmentsData struct {
	Enrollments []enrollmentView
	Status      string
	Church      string
	Statuses    []domain.EnrollmentStatus
	Next        string
}

func (s *Server) dashEnrollments(w http.ResponseWriter, r *http.Request, d *dashRequest) {
	data := enrollmentsData{Status: r.URL.Query().Get("status"), Church: strings.TrimSpace(r.URL.Query().Get("church_id")), Statuses: domain.EnrollmentStatuses}
	q := url.Values{"limit": {"50"}}
	if data.Status != "" {
		q.Set("status", data.Status)
	}
	if data.Church != "" {
		q.Set("church_id", data.Church)
	}
	if c := r.URL.Query().Get("cursor"); c != "" {
		q.Set("cursor", c)
	}
	var page listPage[enrollmentView]
	if !s.dashGet(w, r, d, "/v1/enrollments?"+q.Encode(), &page) {
		return
	}
	data.Enrollments = page.Data
	if page.NextCursor != nil {
		q.Set("cursor", *page.NextCursor)
		q.Del("limit")
		data.Next = q.Encode()
	}
	s.renderDash(w, r, d, dashView{Page: "enrollments", Title: "Enrollments", Nav: "enrollments", Data: data})
}

type enrollmentData struct {
	Enrollment enrollmentView
	// Events are the enrollment's events, oldest first.
	Events []envelopeOf
	Move   string
}

func (s *Server) dashEnrollment(w http.ResponseWriter, r *http.Request, d *dashRequest) {
	var data enrollmentData
	if !s.dashGet(w, r, d, "/v1/enrollments/"+url.PathEscape(mux.Vars(r)["id"]), &data.Enrollment) {
		return
	}
	events, err := s.app.EnrollmentEvents(r.Context(), d.principal.PartnerID, data.Enrollment.EnrollmentID)
	if err != nil {
		s.dashFail(w, r, d, err)
		return
	}
	for _, raw := range events {
		var e envelopeOf
		if err := json.Unmarshal(raw, &e); err != nil {
			s.dashFail(w, r, d, err)
			return
		}
		data.Events = append(data.Events, e)
	}
	s.renderDash(w, r, d, dashView{Page: "enrollment", Title: "Enrollment", Nav: "enrollments", Data: data})
}

func (s *Server) dashConfirmMove(w http.ResponseWriter, r *http.Request, d *dashRequest) {
	vars := mux.Vars(r)
	data := enrollmentData{Move: vars["move"]}
	if s.dashGet(w, r, d, "/v1/enrollments/"+url.PathEscape(vars["id"]), &data.Enrollment) {
		s.renderDash(w, r, d, dashView{Page: "enrollment_move", Title: strings.ToUpper(data.Move[:1]) + data.Move[1:] + " this enrollment?", Nav: "enrollments", Data: data})
	}
}

// dashMoveNotices name the notice each move's redirect shows.
var dashMoveNotices = map[string]string{"cancel": "canceled", "pause": "paused", "resume": "resumed"}

func (s *Server) dashMove(w http.ResponseWriter, r *http.Request, d *dashRequest) {
	vars := mux.Vars(r)
	var body any = struct{}{}
	if reason := strings.TrimSpace(r.PostFormValue("reason")); vars["move"] == "cancel" && reason != "" {
		body = cancelRequest{Reason: &reason}
	}
	if s.dashAct(w, r, d, http.MethodPost, "/v1/enrollments/"+url.PathEscape(vars["id"])+"/"+vars["move"], body, nil) {
		dashDone(w, r, "/enrollments/"+url.PathEscape(vars["id"]), dashMoveNotices[vars["move"]])
	}
}

type churchesData struct {
	Churches []churchView
	Next     string
	Results  []rowResult
}

func (s *Server) dashChurches(w http.ResponseWriter, r *http.Request, d *dashRequest) {
	q := url.Values{"limit": {"100"}}
	if c := r.URL.Query().Get("cursor"); c != "" {
		q.Set("cursor", c)
	}
	var page listPage[churchView]
	if !s.dashGet(w, r, d, "/v1/churches?"+q.Encode(), &page) {
		return
	}
	data := churchesData{Churches: page.Data}
	if page.NextCursor != nil {
		data.Next = url.Values{"cursor": {*page.NextCursor}}.Encode()
	}
	s.renderDash(w, r, d, dashView{Page: "churches", Title: "Churches", Nav: "churches", Data: data})
}

// dashImport imports the churches of an uploaded CSV file: a header row
// naming the columns name and, optionally, external_id, then one church a
// row. Every row goes to the import as it is, which judges it by its own
// rules (and refuses more than 1000 rows).
func (s *Server) dashImport(w http.ResponseWriter, r *http.Request, d *dashRequest) {
	rows, err := readChurchCSV(r)
	if err != nil {
		s.dashProblem(w, r, d, problem{Title: "Unreadable file", Status: http.StatusUnprocessableEntity, Detail: err.Error()})
		return
	}
	var out struct {
		Results []rowResult `json:"results"`
	}
	if !s.dashAct(w, r, d, http.MethodPost, "/v1/churches/import", map[string]any{"churches": rows}, &out) {
		return
	}
	lines := make([]importLine, len(out.Results))
	for i, res := range out.Results {
		lines[i] = importLine{rowResult: res, Line: res.Index + 2}
	}
	s.renderDash(w, r, d, dashView{Page: "import", Title: "Import results", Nav: "churches", Data: lines})
}

// importLine is one row's result beside its line in the file (the header
// is line 1).
type importLine struct {
	rowResult
	Line int
}

// readChurchCSV reads the uploaded file's rows as import rows.
func readChurchCSV(r *http.Request) ([]map[string]string, error) {
	f, _, err := r.FormFile("file")
	if err != nil {
		return nil, errors.New("choose a CSV file to import")
	}
	defer f.Close()
	cr := csv.NewReader(f)
	cr.FieldsPerRecord = -1
	header, err := cr.Read()
	if err != nil {
		return nil, errors.New("the file is empty or not CSV; its first row names the columns: name, external_id")
	}
	cols := map[string]int{}
	for i, h := range header {
		cols[strings.ToLower(strings.TrimSpace(strings.TrimPrefix(h, "\ufeff")))] = i
	}
	if _, ok := cols["name"]; !ok {
		return nil, errors.New("the first row must name the columns, one of them name (and optionally external_id)")
	}
	rows := []map[string]string{}
	for {
		rec, err := cr.Read()
		if err == io.EOF {
			return rows, nil
		}
		var pe *csv.ParseError
		if errors.As(err, &pe) {
			return nil, errors.New("line " + strconv.Itoa(pe.Line) + " is not valid CSV: " + pe.Err.Error())
		}
		if err != nil {
			return nil, err
		}
		row := map[string]string{}
		for _, name := range []string{"name", "external_id"} {
			if i, ok := cols[name]; ok && i < len(rec) && (name == "name" || rec[i] != "") {
				row[name] = rec[i]
			}
		}
		rows = append(rows, row)
	}
}
