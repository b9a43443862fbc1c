package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	gql "github.com/graph-gophers/graphql-go"
	"github.com/graph-gophers/graphql-go/relay"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A real GraphQL upstream (graph-gophers/graphql-go) for the GraphQL
// adapter's end-to-end tests.
const gqlSchema = `
schema { query: Query mutation: Mutation }
enum Genre { FICTION SCIENCE }
type Query {
  book(id: ID!): Book
  books(genre: Genre): [Book!]!
  broken: String!
}
type Mutation {
  addBook(title: String!, genre: Genre!): Book!
}
type Book {
  id: ID!
  title: String!
  genre: Genre!
  reviews: [String!]
}
`

const gqlDocument = `
# Fetch one book by id.
query GetBook($id: ID!) { book(id: $id) { id title genre } }

# List books, optionally of one genre.
query ListBooks($genre: Genre) { books(genre: $genre) { id title } }

# A book with its reviews (the reviews of book 2 fail).
query BookReviews($id: ID!) { book(id: $id) { id reviews } }

# Always fails.
query Broken { broken }

# Add a book.
mutation AddBook($title: String!, $genre: Genre!) { addBook(title: $title, genre: $genre) { id title genre } }
`

type gqlBook struct{ id, title, genre string }

type gqlRoot struct {
	mu    sync.Mutex
	books []*gqlBook
}

type gqlBookResolver struct{ b *gqlBook }

func (r gqlBookResolver) ID() gql.ID    { return gql.ID(r.b.id) }
func (r gqlBookResolver) Title() string { return r.b.title }
func (r gqlBookResolver) Genre() string { return r.b.genre }
func (r gqlBookResolver) Reviews() (*[]string, error) {
	if r.b.id == "2" {
		return nil, errors.New("reviews unavailable")
	}
	return &[]string{"good"}, nil
}

func (q *gqlRoot) Book(args struct{ ID gql.ID }) *gqlBookResolver {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, b := range q.books {
		if b.id == string(args.ID) {
			return &gqlBookResolver{b}
		}
	}
	return nil
}

func (q *gqlRoot) Books(args struct{ Genre *string }) []gqlBookResolver {
	q.mu.Lock()
	defer q.mu.Unlock()
	var out []gqlBookResolver
	for _, b := range q.books {
		if args.Genre == nil || *args.Genre == b.genre {
			out = append(out, gqlBookResolver{b})
		}
	}
	return out
}

func (q *gqlRoot) Broken() (string, error) { return "", errors.New("broken on purpose") }

func (q *gqlRoot) AddBook(args struct{ Title, Genre string }) gqlBookResolver {
	q.mu.Lock()
	defer q.mu.Unlock()
	b := &gqlBook{fmt.Sprint(len(q.books) + 1), args.Title, args.Genre}
	q.books = append(q.books, b)
	return gqlBookResolver{b}
}

// gqlUpstream serves the GraphQL API at /graphql; it requires the bearer
// token and records the Authorization header it saw.
func gqlUpstream(t testing.TB, token string) *httptest.Server {
	root := &gqlRoot{books: []*gqlBook{{"1", "Dune", "FICTION"}, {"2", "Cosmos", "SCIENCE"}}}
	h := &relay.Handler{Schema: gql.MustParseSchema(gqlSchema, root)}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /graphql", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			io.WriteString(w, `{"errors":[{"message":"bad token"}]}`)
			return
		}
		h.ServeHTTP(w, r)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

const gqlToken = "gql-7c1e-very-secret"

// gqlGateway starts crank with a GraphQL entry serving a document of
// several operations and a single-operation entry.
func gqlGateway(t testing.TB) (*gateway, *httptest.Server) {
	up := gqlUpstream(t, gqlToken)
	doc := filepath.Join(t.TempDir(), "library.graphql")
	writeFile(t, doc, gqlDocument)
	ops := fmt.Sprintf(`
operations:
  - name: library
    adapter: graphql
    timeout: 5s
    config:
      endpoint: %[1]s/graphql
      document: %[2]s
      headers: {Authorization: "Bearer {env.CRANK_E2E_GQL_TOKEN}"}
  - name: science_books
    description: List the science books.
    adapter: graphql
    config:
      endpoint: %[1]s/graphql
      query: "query { books(genre: SCIENCE) { title } }"
      headers: {Authorization: "Bearer {env.CRANK_E2E_GQL_TOKEN}"}
`, up.URL, doc)
	g := startGateway(t, gatewayOptions{Operations: ops, Env: []string{"CRANK_E2E_GQL_TOKEN=" + gqlToken}})
	return g, up
}

func TestGraphQLAdapter(t *testing.T) {
	t.Parallel()
	g, up := gqlGateway(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cs := g.connect(ctx)

	list, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	tools := map[string]*mcp.Tool{}
	var names []string
	for _, tool := range list.Tools {
		tools[tool.Name] = tool
		names = append(names, tool.Name)
	}
	slices.Sort(names)
	if strings.Join(names, ",") != "AddBook,BookReviews,Broken,GetBook,ListBooks,science_books" {
		t.Fatalf("tools = %v", names)
	}
	// Queries are read-only; the mutation may be destructive.
	if a := tools["GetBook"].Annotations; a == nil || !a.ReadOnlyHint || a.DestructiveHint == nil || *a.DestructiveHint {
		t.Errorf("GetBook annotations: %+v", a)
	}
	if a := tools["AddBook"].Annotations; a == nil || a.ReadOnlyHint || a.DestructiveHint == nil || !*a.DestructiveHint || a.IdempotentHint {
		t.Errorf("AddBook annotations: %+v", a)
	}
	if d := tools["GetBook"].Description; d != "Fetch one book by id." {
		t.Errorf("GetBook description = %q", d)
	}
	if d := tools["science_books"].Description; d != "List the science books." {
		t.Errorf("science_books description = %q (the operator's wins)", d)
	}
	in, _ := json.Marshal(tools["AddBook"].InputSchema)
	if !strings.Contains(string(in), `"genre":{"enum":["FICTION","SCIENCE"],"type":"string"}`) || !strings.Contains(string(in), `"required":["title","genre"]`) {
		t.Errorf("AddBook input schema: %s", in)
	}

	call := func(name string, args map[string]any) *mcp.CallToolResult {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return res
	}
	res := call("GetBook", map[string]any{"id": "1"})
	sc, _ := json.Marshal(res.StructuredContent)
	if res.IsError || string(sc) != `{"data":{"book":{"genre":"FICTION","id":"1","title":"Dune"}}}` {
		t.Errorf("GetBook: isError=%v %s %q", res.IsError, sc, textOf(res))
	}
	res = call("AddBook", map[string]any{"title": "Solaris", "genre": "FICTION"})
	sc, _ = json.Marshal(res.StructuredContent)
	if res.IsError || string(sc) != `{"data":{"addBook":{"genre":"FICTION","id":"3","title":"Solaris"}}}` {
		t.Errorf("AddBook: isError=%v %s %q", res.IsError, sc, textOf(res))
	}
	res = call("science_books", nil)
	if res.IsError || !strings.Contains(textOf(res), `"title":"Cosmos"`) {
		t.Errorf("science_books: %q", textOf(res))
	}

	// Partial data: a result (not an error) that says so first.
	res = call("BookReviews", map[string]any{"id": "2"})
	if res.IsError || !strings.HasPrefix(textOf(res), "PARTIAL RESULT: the GraphQL server returned data together with 1 error: reviews unavailable (at book.reviews)") {
		t.Errorf("BookReviews: isError=%v %q", res.IsError, textOf(res))
	}
	sc, _ = json.Marshal(res.StructuredContent)
	if !strings.Contains(string(sc), `"partial":true`) || !strings.Contains(string(sc), `"reviews":null`) {
		t.Errorf("BookReviews structured: %s", sc)
	}

	for _, c := range []struct {
		tool string
		args map[string]any
		want string
	}{
		{"GetBook", map[string]any{"id": true}, `invalid arguments for tool "GetBook": id:`},
		{"GetBook", map[string]any{}, `invalid arguments for tool "GetBook": missing required argument id`},
		{"GetBook", map[string]any{"id": "1", "extra": 1}, `invalid arguments for tool "GetBook"`},
		{"ListBooks", map[string]any{"genre": "POETRY"}, `invalid arguments for tool "ListBooks": genre:`},
		{"Broken", nil, "upstream answered with an error (query Broken at " + up.URL + "): status GRAPHQL_ERROR: the GraphQL server answered with 1 error: broken on purpose (at broken)"},
	} {
		res := call(c.tool, c.args)
		if !res.IsError || !strings.Contains(textOf(res), c.want) {
			t.Errorf("%s %v: want isError with %q, got isError=%v %q", c.tool, c.args, c.want, res.IsError, textOf(res))
		}
		if strings.Contains(textOf(res), gqlToken) {
			t.Errorf("%s: the token leaks: %q", c.tool, textOf(res))
		}
	}
	if strings.Contains(g.log.String(), gqlToken) {
		t.Error("the token appears in the gateway log")
	}
}

// BenchmarkUnaryGraphQL measures a GraphQL query tool call through Crank
// (go-sdk client → Caddy → host → graphql adapter process → upstream)
// against a direct POST of the same GraphQL request, in one run, and
// prints the added p50 latency and the ratio.
func BenchmarkUnaryGraphQL(b *testing.B) {
	g, up := gqlGateway(b)
	ctx := context.Background()
	httpc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	body := []byte(`{"query":"query GetBook($id: ID!) { book(id: $id) { id title genre } }","operationName":"GetBook","variables":{"id":"1"}}`)
	direct := func() error {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, up.URL+"/graphql", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+gqlToken)
		resp, err := httpc.Do(req)
		if err != nil {
			return err
		}
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return err
	}
	cs := g.connect(ctx)
	viaCrank := func() error {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "GetBook", Arguments: map[string]any{"id": "1"}})
		if err == nil && res.IsError {
			err = fmt.Errorf("tool error: %s", textOf(res))
		}
		return err
	}
	p50 := map[string]time.Duration{}
	for _, c := range []struct {
		name string
		call func() error
	}{{"direct", direct}, {"crank", viaCrank}} {
		b.Run(c.name, func(b *testing.B) {
			for range 50 {
				if err := c.call(); err != nil {
					b.Fatal(err)
				}
			}
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for range b.N {
				start := time.Now()
				if err := c.call(); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(start))
			}
			slices.Sort(lat)
			p50[c.name] = lat[len(lat)/2]
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
		})
	}
	if p50["direct"] > 0 && p50["crank"] > 0 {
		fmt.Printf("\nGraphQL query tool call, same run (p50 latency, sequential):\n"+
			"  direct POST    %9v\n  through Crank  %9v\n  Crank adds %v (%.1fx the direct POST)\n",
			p50["direct"], p50["crank"], p50["crank"]-p50["direct"], float64(p50["crank"])/float64(p50["direct"]))
	}
}
