package graphql_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/crankmcp/crank/plugins/graphql"
	"github.com/crankmcp/crank/plugins/sdk"
	"github.com/crankmcp/crank/plugins/sdk/adaptertest"
)

// githubSDL is GitHub's published GraphQL schema, from the npm package
// @octokit/graphql-schema pinned in e2e/octokit (`make octokit-deps`); the
// test is skipped without it (failed on CI).
func githubSDL(t *testing.T) string {
	t.Helper()
	path, _ := filepath.Abs("../../e2e/octokit/node_modules/@octokit/graphql-schema/schema.graphql")
	if _, err := os.Stat(path); err != nil {
		msg := "e2e/octokit/node_modules is missing: run `make octokit-deps` (npm ci in e2e/octokit)"
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return path
}

// GitHub's published schema loads: the field it defines twice the same
// way (EnterpriseOwnerInfo.repositoryDeployKeySetting, and its
// …Organizations) is merged with a warning, and a query is generated for
// each Query field — union members' fields that differ (nullability,
// type) selected under aliases — without one the schema refuses.
func TestGitHubSchema(t *testing.T) {
	t.Parallel()
	h := adaptertest.New(t, graphql.New())
	cfg := map[string]any{"endpoint": "http://127.0.0.1:1/graphql", "schema": githubSDL(t),
		"generate": map[string]any{"query_fields": true, "max_depth": 3}}
	list, diags, err := h.Expand(ctxT(t), adaptertest.Call{Operation: "github", Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	merged := 0
	for _, d := range diags {
		switch {
		case d.Severity == sdk.SeverityError:
			t.Errorf("%s: %s", d.Field, d.Message)
		case strings.Contains(d.Message, "is defined twice the same way"):
			merged++
			if !strings.HasPrefix(d.Message, "EnterpriseOwnerInfo.repositoryDeployKeySetting") || d.Field != "schema" {
				t.Errorf("merge warning: %s: %s", d.Field, d.Message)
			}
		case strings.Contains(d.Message, "is not valid"):
			t.Errorf("%s: %s", d.Field, d.Message)
		}
	}
	if merged != 2 {
		t.Errorf("%d fields merged, want 2 (repositoryDeployKeySetting and repositoryDeployKeySettingOrganizations)", merged)
	}
	if len(list) < 20 {
		t.Fatalf("%d tools", len(list))
	}
	// Without aliases, the union selections of these two conflict
	// (logoUrl: URI! and URI; email: String and String!).
	byName := map[string]sdk.Tool{}
	for _, tool := range list {
		byName[tool.Name] = tool
	}
	for name, alias := range map[string]string{"search": "logoUrl_", "sponsorables": "email_"} {
		if tool, ok := byName[name]; !ok || !strings.Contains(string(tool.Config), alias) {
			t.Errorf("tool %s: %s", name, tool.Config)
		}
	}
	t.Logf("%d tools from GitHub's schema", len(list))
}

// A generated selection of a union whose members have a field of one
// name and different types (String and String!, Int and [Int]) selects
// the later ones under an alias, so the query validates and the result
// keeps both.
func TestGenerateUnionConflicts(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	sdl := filepath.Join(dir, "s.graphqls")
	if err := os.WriteFile(sdl, []byte(`type Query { find: [Hit!]! }
union Hit = Doc | Pic | Vid
type Doc { id: ID! title: String size: Int }
type Pic { id: ID! title: String! size: [Int] }
type Vid { id: ID! title: String size: Int }
`), 0o644); err != nil {
		t.Fatal(err)
	}
	h := adaptertest.New(t, graphql.New())
	tools := expand(t, h, map[string]any{"endpoint": "http://127.0.0.1:1/graphql", "schema": sdl, "generate": map[string]any{"query_fields": []string{"find"}}})
	doc := string(tools["find"].Config)
	for _, want := range []string{`title_Pic: title`, `size_Pic: size`} {
		if !strings.Contains(doc, want) {
			t.Errorf("the generated query has no %q: %s", want, doc)
		}
	}
	if strings.Contains(doc, "title_Vid") || strings.Contains(doc, "id_Pic") {
		t.Errorf("the generated query aliases fields of one type: %s", doc)
	}
	if !strings.Contains(string(tools["find"].OutputSchema), `"title_Pic"`) {
		t.Errorf("the output schema has no title_Pic: %s", tools["find"].OutputSchema)
	}
}
