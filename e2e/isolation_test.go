package e2e

import (
	"net/http"
	"testing"
)

// A partner sees only its own churches, on every read, and a church of
// another partner is the same 404 as a church that does not exist.
func TestPartnerIsolationOnEveryRead(t *testing.T) {
	t.Parallel()
	ts := startStack(t)
	a, _ := ts.partner(t)
	b, _ := ts.partner(t)
	var ia, ib importResponse
	a.Do(http.MethodPost, importPath, `{"churches":[{"name":"A1","external_id":"shared"},{"name":"A2"},{"name":"A3"}]}`, nil).JSON(t, &ia)
	// External ids are per partner: B may use A's.
	b.Do(http.MethodPost, importPath, `{"churches":[{"name":"B1","external_id":"shared"}]}`, nil).JSON(t, &ib)
	if ib.Results[0].Status != "created" {
		t.Fatalf("B reusing A's external id: %+v", ib.Results[0])
	}
	aID, bID := ia.Results[0].Church.ID, ib.Results[0].Church.ID

	missing := checkProblem(t, b.Do(http.MethodGet, "/v1/churches/ch_2bK5ZbqfD6u3PcvoYQ1vQWR3NnZ", nil, nil), 404, "not-found")
	foreign := checkProblem(t, b.Do(http.MethodGet, "/v1/churches/"+aID, nil, nil), 404, "not-found")
	if missing["title"] != foreign["title"] || missing["type"] != foreign["type"] {
		t.Fatalf("a foreign church answers differently from a missing one: %v vs %v", foreign, missing)
	}
	checkProblem(t, a.Do(http.MethodGet, "/v1/churches/"+bID, nil, nil), 404, "not-found")

	var list struct {
		Data []struct {
			ID, Name string
		} `json:"data"`
		NextCursor *string `json:"next_cursor"`
	}
	b.Do(http.MethodGet, "/v1/churches", nil, nil).JSON(t, &list)
	if len(list.Data) != 1 || list.Data[0].ID != bID {
		t.Fatalf("B lists %+v", list.Data)
	}
	a.Do(http.MethodGet, "/v1/churches?limit=1", nil, nil).JSON(t, &list)
	if len(list.Data) != 1 || list.Data[0].ID != aID || list.NextCursor == nil {
		t.Fatalf("A's first page %+v", list)
	}
	// A's cursor is refused for B, not used to page through A's list.
	checkProblem(t, b.Do(http.MethodGet, "/v1/churches?cursor="+*list.NextCursor, nil, nil), 400, "invalid-cursor")
	// A tampered cursor is refused too.
	cur := []byte(*list.NextCursor)
	cur[len(cur)-2] ^= 1
	checkProblem(t, a.Do(http.MethodGet, "/v1/churches?cursor="+string(cur), nil, nil), 400, "invalid-cursor")
	if r := a.Do(http.MethodGet, "/v1/churches?limit=1&cursor="+*list.NextCursor, nil, nil); r.Status != 200 {
		t.Fatalf("A's own cursor: %d %s", r.Status, r.Body)
	}
}

// A read right after a write on the same instance sees the write.
func TestReadAfterWrite(t *testing.T) {
	t.Parallel()
	ts := startStack(t)
	c, _ := ts.partner(t)
	for i := range 20 {
		var imp importResponse
		c.Do(http.MethodPost, importPath, `{"churches":[{"name":"Fresh"}]}`, nil).JSON(t, &imp)
		id := imp.Results[0].Church.ID
		if r := c.Do(http.MethodGet, "/v1/churches/"+id, nil, nil); r.Status != 200 {
			t.Fatalf("round %d: GET right after import: %d %s", i, r.Status, r.Body)
		}
		var list struct {
			Data []struct{ ID string } `json:"data"`
		}
		c.Do(http.MethodGet, "/v1/churches?limit=100", nil, nil).JSON(t, &list)
		if len(list.Data) != i+1 || list.Data[i].ID != id {
			t.Fatalf("round %d: list holds %d churches, last %+v", i, len(list.Data), list.Data)
		}
	}
}
