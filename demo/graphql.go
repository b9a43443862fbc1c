package demo

import (
	_ "embed"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	gql "github.com/graph-gophers/graphql-go"
	"github.com/graph-gophers/graphql-go/relay"
)

// The demo GraphQL API of `make run` (handler module
// http.handlers.crank_demo_graphql): a small library of books and authors
// with the schema in library.graphqls, served at POST /graphql, and its
// subscription (graphqlsub.go) over graphql-transport-ws (GET /graphql)
// and GraphQL over SSE (POST /graphql, Accept: text/event-stream). Book
// 3's rating always fails, so get_book with id 3 shows a partial result.

//go:embed library.graphqls
var librarySchema string

func init() {
	caddy.RegisterModule(GraphQLAPI{})
	httpcaddyfile.RegisterHandlerDirective("crank_demo_graphql", func(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
		a := new(GraphQLAPI)
		return a, a.UnmarshalCaddyfile(h.Dispenser)
	})
	httpcaddyfile.RegisterDirectiveOrder("crank_demo_graphql", httpcaddyfile.Before, "respond")
}

// GraphQLAPI is the demo GraphQL API.
type GraphQLAPI struct {
	handler http.Handler
}

// CaddyModule returns the Caddy module information.
func (GraphQLAPI) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "http.handlers.crank_demo_graphql", New: func() caddy.Module { return new(GraphQLAPI) }}
}

// UnmarshalCaddyfile takes no arguments: `crank_demo_graphql`.
func (a *GraphQLAPI) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next()
	if d.NextArg() {
		return d.ArgErr()
	}
	return nil
}

// Provision seeds the library and parses the schema.
func (a *GraphQLAPI) Provision(caddy.Context) error {
	lib := &gqlLibrary{
		authors: []*gqlAuthor{{"a1", "Ursula K. Le Guin"}, {"a2", "Carl Sagan"}, {"a3", "Mary Beard"}},
		books: []*gqlBook{
			{"1", "The Left Hand of Darkness", "FICTION", 1969, "a1", 4.6},
			{"2", "Cosmos", "SCIENCE", 1980, "a2", 4.7},
			{"3", "SPQR", "HISTORY", 2015, "a3", 4.4},
			{"4", "The Dispossessed", "FICTION", 1974, "a1", 4.5},
		},
		next: 5,
	}
	schema, err := gql.ParseSchema(librarySchema, &gqlRoot{lib}, gql.UseStringDescriptions(), gql.MaxDepth(10))
	if err != nil {
		return fmt.Errorf("demo GraphQL schema: %v", err)
	}
	api := &relay.Handler{Schema: schema}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /graphql", func(w http.ResponseWriter, r *http.Request) {
		if wantsEventStream(r) {
			serveSubscriptionSSE(schema, w, r) // GraphQL over SSE
			return
		}
		http.MaxBytesHandler(api, 1<<20).ServeHTTP(w, r)
	})
	mux.HandleFunc("GET /graphql", func(w http.ResponseWriter, r *http.Request) {
		serveSubscriptionsWS(schema, w, r) // graphql-transport-ws
	})
	a.handler = mux
	return nil
}

// ServeHTTP serves the API.
func (a *GraphQLAPI) ServeHTTP(w http.ResponseWriter, r *http.Request, _ caddyhttp.Handler) error {
	a.handler.ServeHTTP(w, r)
	return nil
}

type gqlLibrary struct {
	mu      sync.Mutex
	authors []*gqlAuthor
	books   []*gqlBook
	next    int
}

type gqlAuthor struct{ id, name string }

type gqlBook struct {
	id, title, genre string
	year             int32
	author           string
	rating           float64
}

type gqlRoot struct{ l *gqlLibrary }

type gqlBookR struct {
	l *gqlLibrary
	b *gqlBook
}

func (r *gqlBookR) ID() gql.ID    { return gql.ID(r.b.id) }
func (r *gqlBookR) Title() string { return r.b.title }
func (r *gqlBookR) Genre() string { return r.b.genre }
func (r *gqlBookR) Year() *int32 {
	if r.b.year == 0 {
		return nil
	}
	return &r.b.year
}
func (r *gqlBookR) Author() *gqlAuthorR { return &gqlAuthorR{r.l, r.l.author(r.b.author)} }
func (r *gqlBookR) Rating() (*float64, error) {
	if r.b.id == "3" {
		return nil, errors.New("the ratings service is unavailable")
	}
	return &r.b.rating, nil
}

type gqlAuthorR struct {
	l *gqlLibrary
	a *gqlAuthor
}

func (r *gqlAuthorR) ID() gql.ID   { return gql.ID(r.a.id) }
func (r *gqlAuthorR) Name() string { return r.a.name }
func (r *gqlAuthorR) Books() []*gqlBookR {
	r.l.mu.Lock()
	defer r.l.mu.Unlock()
	var out []*gqlBookR
	for _, b := range r.l.books {
		if b.author == r.a.id {
			out = append(out, &gqlBookR{r.l, b})
		}
	}
	return out
}

func (l *gqlLibrary) author(id string) *gqlAuthor {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, a := range l.authors {
		if a.id == id {
			return a
		}
	}
	return &gqlAuthor{id, "(unknown)"}
}

func (q *gqlRoot) Book(args struct{ ID gql.ID }) *gqlBookR {
	q.l.mu.Lock()
	defer q.l.mu.Unlock()
	for _, b := range q.l.books {
		if b.id == string(args.ID) {
			return &gqlBookR{q.l, b}
		}
	}
	return nil
}

func (q *gqlRoot) Books(args struct {
	Genre  *string
	Search *string
	First  int32
}) []*gqlBookR {
	q.l.mu.Lock()
	defer q.l.mu.Unlock()
	var out []*gqlBookR
	for _, b := range q.l.books {
		if int32(len(out)) >= args.First {
			break
		}
		if args.Genre != nil && *args.Genre != b.genre ||
			args.Search != nil && !strings.Contains(strings.ToLower(b.title), strings.ToLower(*args.Search)) {
			continue
		}
		out = append(out, &gqlBookR{q.l, b})
	}
	return out
}

func (q *gqlRoot) Authors() []*gqlAuthorR {
	q.l.mu.Lock()
	defer q.l.mu.Unlock()
	out := make([]*gqlAuthorR, 0, len(q.l.authors))
	for _, a := range q.l.authors {
		out = append(out, &gqlAuthorR{q.l, a})
	}
	return out
}

func (q *gqlRoot) AddBook(args struct {
	Input struct {
		Title    string
		Genre    string
		AuthorID gql.ID
		Year     *int32
	}
}) (*gqlBookR, error) {
	in := args.Input
	if strings.TrimSpace(in.Title) == "" {
		return nil, errors.New("title must not be empty")
	}
	q.l.mu.Lock()
	defer q.l.mu.Unlock()
	if !slices.ContainsFunc(q.l.authors, func(a *gqlAuthor) bool { return a.id == string(in.AuthorID) }) {
		return nil, fmt.Errorf("no author with id %q (authors: a1, a2, a3)", in.AuthorID)
	}
	b := &gqlBook{id: fmt.Sprint(q.l.next), title: in.Title, genre: in.Genre, author: string(in.AuthorID), rating: 0}
	if in.Year != nil {
		b.year = *in.Year
	}
	q.l.next++
	q.l.books = append(q.l.books, b)
	return &gqlBookR{q.l, b}, nil
}

func (q *gqlRoot) DeleteBook(args struct{ ID gql.ID }) bool {
	q.l.mu.Lock()
	defer q.l.mu.Unlock()
	n := len(q.l.books)
	q.l.books = slices.DeleteFunc(q.l.books, func(b *gqlBook) bool { return b.id == string(args.ID) })
	return len(q.l.books) < n
}

// Interface guards.
var (
	_ caddy.Provisioner           = (*GraphQLAPI)(nil)
	_ caddyhttp.MiddlewareHandler = (*GraphQLAPI)(nil)
	_ caddyfile.Unmarshaler       = (*GraphQLAPI)(nil)
)
