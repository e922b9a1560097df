package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/partnergiving/giving/httpapi/apitest"
)

type importResponse struct {
	Results []struct {
		Index  int    `json:"index"`
		Status string `json:"status"`
		Church *struct {
			ID         string  `json:"id"`
			Name       string  `json:"name"`
			ExternalID *string `json:"external_id"`
			CreatedAt  string  `json:"created_at"`
		} `json:"church"`
		Error *struct {
			Type, Title, Detail string
		} `json:"error"`
	} `json:"results"`
}

func TestImportJudgesEachRowAlone(t *testing.T) {
	t.Parallel()
	ts := startStack(t)
	c, _ := ts.partner(t)
	body := `{"churches":[
		{"name":"Grace Chapel","external_id":"crm-1"},
		{"name":"   "},
		{"name":5},
		{"external_id":"x"},
		{"name":"Dup","external_id":"crm-1"},
		{"name":"` + strings.Repeat("a", 201) + `"},
		{"name":"Extra","color":"red"},
		null,
		"text",
		{"name":"  St Mark  ","external_id":null},
		{"name":"Bad ext","external_id":""}
	]}`
	resp := c.Do(http.MethodPost, "/v1/churches/import", body, nil)
	if resp.Status != http.StatusOK {
		t.Fatalf("import: %d %s", resp.Status, resp.Body)
	}
	var out importResponse
	resp.JSON(t, &out)
	want := []string{"created", "rejected", "rejected", "rejected", "rejected", "rejected", "rejected", "rejected", "rejected", "created", "rejected"}
	if len(out.Results) != len(want) {
		t.Fatalf("got %d results, want %d", len(out.Results), len(want))
	}
	for i, r := range out.Results {
		if r.Index != i || r.Status != want[i] {
			t.Errorf("row %d: index %d status %s, want %s (%+v)", i, r.Index, r.Status, want[i], r.Error)
		}
	}
	if out.Results[4].Error.Type != "/problems/external-id-taken" {
		t.Errorf("duplicate external_id: type %q", out.Results[4].Error.Type)
	}
	if got := out.Results[9].Church.Name; got != "St Mark" {
		t.Errorf("name not trimmed: %q", got)
	}

	// A later batch reusing an external id is rejected for that row only.
	resp = c.Do(http.MethodPost, "/v1/churches/import", `{"churches":[{"name":"Again","external_id":"crm-1"},{"name":"New","external_id":"crm-2"}]}`, nil)
	resp.JSON(t, &out)
	if out.Results[0].Status != "rejected" || out.Results[1].Status != "created" {
		t.Fatalf("second batch: %s", resp.Body)
	}
}

func TestImportRefusesOversizedBatches(t *testing.T) {
	t.Parallel()
	ts := startStack(t)
	c, _ := ts.partner(t)
	rows := make([]string, 1001)
	for i := range rows {
		rows[i] = fmt.Sprintf(`{"name":"Church %d"}`, i)
	}
	resp := c.Do(http.MethodPost, "/v1/churches/import", `{"churches":[`+strings.Join(rows, ",")+`]}`, nil)
	if resp.Status != http.StatusRequestEntityTooLarge || resp.Map(t)["type"] != "/problems/batch-too-large" {
		t.Fatalf("1001 rows: %d %s", resp.Status, resp.Body)
	}
	resp = c.Do(http.MethodPost, "/v1/churches/import", `{"churches":[`+strings.Join(rows[:1000], ",")+`]}`, nil)
	if resp.Status != http.StatusOK {
		t.Fatalf("1000 rows: %d %s", resp.Status, resp.Body)
	}
}

func TestChurchesListPagesAndIsolatesPartners(t *testing.T) {
	t.Parallel()
	ts := startStack(t)
	a, _ := ts.partner(t)
	b, _ := ts.partner(t)
	var rows []string
	for i := range 7 {
		rows = append(rows, fmt.Sprintf(`{"name":"A%d"}`, i))
	}
	var imp importResponse
	a.Do(http.MethodPost, "/v1/churches/import", `{"churches":[`+strings.Join(rows, ",")+`]}`, nil).JSON(t, &imp)
	b.Do(http.MethodPost, "/v1/churches/import", `{"churches":[{"name":"B0"}]}`, nil)

	var seen []string
	cursor := ""
	for page := 0; ; page++ {
		path := "/v1/churches?limit=3"
		if cursor != "" {
			path += "&cursor=" + cursor
		}
		resp := a.Do(http.MethodGet, path, nil, nil)
		var p struct {
			Data []struct {
				ID, Name string
			} `json:"data"`
			HasMore    bool    `json:"has_more"`
			NextCursor *string `json:"next_cursor"`
		}
		resp.JSON(t, &p)
		for _, c := range p.Data {
			seen = append(seen, c.Name)
		}
		if !p.HasMore {
			break
		}
		cursor = *p.NextCursor
		if page > 5 {
			t.Fatal("too many pages")
		}
	}
	if strings.Join(seen, ",") != "A0,A1,A2,A3,A4,A5,A6" {
		t.Fatalf("partner A listed %v", seen)
	}
	// B cannot read A's church, nor reuse A's cursor.
	id := imp.Results[0].Church.ID
	if r := b.Do(http.MethodGet, "/v1/churches/"+id, nil, nil); r.Status != http.StatusNotFound {
		t.Fatalf("foreign church: %d", r.Status)
	}
	if r := a.Do(http.MethodGet, "/v1/churches/"+id, nil, nil); r.Status != http.StatusOK {
		t.Fatalf("own church: %d", r.Status)
	}
	resp := a.Do(http.MethodGet, "/v1/churches?limit=3", nil, nil)
	next := resp.Map(t)["next_cursor"].(string)
	if r := b.Do(http.MethodGet, "/v1/churches?cursor="+next, nil, nil); r.Status != http.StatusBadRequest {
		t.Fatalf("foreign cursor: %d", r.Status)
	}
	if r := b.Do(http.MethodGet, "/v1/churches?limit=0", nil, nil); r.Status != http.StatusUnprocessableEntity {
		t.Fatalf("limit=0: %d", r.Status)
	}
	_ = apitest.Header{}
}

// The largest import a request can carry (1000 rows of names that grow when
// escaped) is stored as one event; it never fails with a 5xx.
func TestLargestImportFitsInOneEvent(t *testing.T) {
	t.Parallel()
	ts := startStack(t)
	c, _ := ts.partner(t)
	rows := make([]string, 1000)
	name := strings.Repeat("<&>", 66) // 198 characters HTML-escaping would grow sixfold
	for i := range rows {
		rows[i] = fmt.Sprintf(`{"name":"%s","external_id":"%s-%04d"}`, name, strings.Repeat("&", 190), i)
	}
	resp := c.Do(http.MethodPost, "/v1/churches/import", `{"churches":[`+strings.Join(rows, ",")+`]}`, nil)
	if resp.Status != http.StatusOK {
		t.Fatalf("largest import: %d %.300s", resp.Status, resp.Body)
	}
	var out importResponse
	resp.JSON(t, &out)
	if len(out.Results) != 1000 || out.Results[999].Status != "created" || out.Results[0].Church.Name != name {
		t.Fatalf("results: %d, last %s", len(out.Results), out.Results[999].Status)
	}
}
