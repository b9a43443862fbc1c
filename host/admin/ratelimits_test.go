package admin_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/crankmcp/crank/host/admin"
	"github.com/crankmcp/crank/host/ratelimit"
)

// A catalog's rate limits are read and replaced as a list, versioned with
// the catalog (editing an entry keeps them, the export carries them);
// each bad field is placed by pointer and nothing is saved. The schema
// of a limit and this replica's budgets have routes of their own.
func TestCatalogRateLimits(t *testing.T) {
	f := newFixture(t)
	f.want(http.StatusCreated, "POST", "/crank/catalogs/c1/operations", f.entry("a", "A"), "If-None-Match", "*")
	f.want(http.StatusPreconditionRequired, "PUT", "/crank/catalogs/c1/rate_limits", `[]`)
	r := f.want(http.StatusBadRequest, "PUT", "/crank/catalogs/c1/rate_limits", `[{"name": "a", "rate": "10/m"}, {"name": "b", "rate": "often", "per": "team"}]`, "If-Match", `"1"`)
	if b := string(r.body); !strings.Contains(b, `"pointer": "/1/per"`) || !strings.Contains(b, `"pointer": "/1/rate"`) ||
		!strings.Contains(b, "must be \u003cn\u003e/\u003cperiod\u003e") && !strings.Contains(b, "must be <n>/<period>") {
		t.Errorf("problems %s", b)
	}
	f.want(http.StatusBadRequest, "PUT", "/crank/catalogs/c1/rate_limits", `[{"name": "a", "rate": "1/s"}, {"name": "a", "rate": "2/s"}]`, "If-Match", `"1"`)
	r = f.want(http.StatusOK, "PUT", "/crank/catalogs/c1/rate_limits?message=tighten", `[{"name": "a_calls", "rate": "10/m", "per": "user", "tool": "a"}]`, "If-Match", `"1"`)
	if cs := r.obj(t)["changes"].([]any); len(cs) != 1 || cs[0].(map[string]any)["rate_limit"] != "a_calls" {
		t.Errorf("changes %s", r.body)
	}
	f.want(http.StatusOK, "PUT", "/crank/catalogs/c1/operations/a", f.entry("a", "A2"), "If-Match", `"2"`)
	got := f.want(http.StatusOK, "GET", "/crank/catalogs/c1/rate_limits", "").obj(t)
	if ls := got["rate_limits"].([]any); len(ls) != 1 || got["version"] != float64(3) {
		t.Fatalf("after editing an entry: %v", got)
	}
	if y := f.want(http.StatusOK, "GET", "/crank/catalogs/c1?format=yaml", "").body; !strings.Contains(string(y), "rate_limits:\n  - name: a_calls\n    rate: 10/m\n    per: user\n    tool: a\n") {
		t.Errorf("export:\n%s", y)
	}
	f.want(http.StatusNotFound, "GET", "/crank/catalogs/none/rate_limits", "")

	w := httptest.NewRecorder()
	if err := (&admin.Gateway{}).ServeHTTP(w, httptest.NewRequest("GET", "/crank/schema/rate_limit", nil)); err != nil || w.Code != http.StatusOK ||
		!strings.Contains(w.Body.String(), `"title":"Rate limit"`) {
		t.Fatalf("schema: %v %d %s", err, w.Code, w.Body)
	}
	bs := ratelimit.NewBudgets()
	bs.Acquire(ratelimit.Limit{Name: "x", Rate: "1/s", Fleet: true})
	w = httptest.NewRecorder()
	if err := (&admin.Gateway{Store: f.st, RateLimits: bs.States}).ServeHTTP(w, httptest.NewRequest("GET", "/crank/rate-limits", nil)); err != nil ||
		!strings.Contains(w.Body.String(), `"name": "x"`) || !strings.Contains(w.Body.String(), `"members": 1`) {
		t.Fatalf("live limits: %v %s", err, w.Body)
	}
}
