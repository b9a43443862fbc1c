package graphql_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	gql "github.com/graph-gophers/graphql-go"
	"github.com/graph-gophers/graphql-go/relay"
)

// The test upstream is a real GraphQL server (graph-gophers/graphql-go)
// on loopback, serving testdata/library.graphqls.

// library is the server's state.
type library struct {
	mu      sync.Mutex
	books   map[string]*book
	authors map[string]*author
	next    int
}

type book struct {
	id, title, genre, published, author string
	pages                               *int32
	rating                              *float64
}

type author struct{ id, name string }

func newLibrary() *library {
	p := func(n int32) *int32 { return &n }
	r := func(f float64) *float64 { return &f }
	return &library{
		books: map[string]*book{
			"1": {id: "1", title: "Dune", genre: "FICTION", published: "1965-08-01", author: "a1", pages: p(412), rating: r(4.5)},
			"2": {id: "2", title: "A Brief History of Time", genre: "SCIENCE", published: "1988-04-01", author: "a2", pages: p(256)},
			"3": {id: "3", title: "The Histories", genre: "HISTORY", author: "a3"},
		},
		authors: map[string]*author{
			"a1": {"a1", "Frank Herbert"}, "a2": {"a2", "Stephen Hawking"}, "a3": {"a3", "Herodotus"},
		},
		next: 4,
	}
}

// root resolves Query, Mutation and Subscription.
type root struct{ l *library }

type bookResolver struct {
	l *library
	b *book
}

func (r *bookResolver) ID() gql.ID       { return gql.ID(r.b.id) }
func (r *bookResolver) Title() string    { return r.b.title }
func (r *bookResolver) Name() string     { return r.b.title }
func (r *bookResolver) Genre() string    { return r.b.genre }
func (r *bookResolver) Pages() *int32    { return r.b.pages }
func (r *bookResolver) Rating() *float64 { return r.b.rating }
func (r *bookResolver) Published() *date {
	if r.b.published == "" {
		return nil
	}
	return &date{r.b.published}
}
func (r *bookResolver) Author() *authorResolver {
	r.l.mu.Lock()
	defer r.l.mu.Unlock()
	return &authorResolver{r.l, r.l.authors[r.b.author]}
}
func (r *bookResolver) Reviews() (*[]string, error) {
	if r.b.id == "3" {
		return nil, errors.New("the reviews service is unavailable")
	}
	rv := []string{"Great read.", "Loved it."}
	return &rv, nil
}

type authorResolver struct {
	l *library
	a *author
}

func (r *authorResolver) ID() gql.ID   { return gql.ID(r.a.id) }
func (r *authorResolver) Name() string { return r.a.name }
func (r *authorResolver) Books() []*bookResolver {
	var out []*bookResolver
	for _, b := range r.l.sortedBooks() {
		if b.author == r.a.id {
			out = append(out, &bookResolver{r.l, b})
		}
	}
	return out
}

type unionResolver struct{ v any }

func (u *unionResolver) ToBook() (*bookResolver, bool) { b, ok := u.v.(*bookResolver); return b, ok }
func (u *unionResolver) ToAuthor() (*authorResolver, bool) {
	a, ok := u.v.(*authorResolver)
	return a, ok
}
func (u *unionResolver) ID() gql.ID {
	if b, ok := u.v.(*bookResolver); ok {
		return b.ID()
	}
	return u.v.(*authorResolver).ID()
}

// date is the custom scalar Date.
type date struct{ s string }

func (date) ImplementsGraphQLType(name string) bool { return name == "Date" }
func (d *date) UnmarshalGraphQL(input any) error {
	s, ok := input.(string)
	if !ok {
		return fmt.Errorf("a Date is a string YYYY-MM-DD, got %T", input)
	}
	if _, err := time.Parse("2006-01-02", s); err != nil {
		return fmt.Errorf("not a date YYYY-MM-DD: %q", s)
	}
	d.s = s
	return nil
}
func (d date) MarshalJSON() ([]byte, error) { return json.Marshal(d.s) }

func (l *library) sortedBooks() []*book {
	var out []*book
	for _, b := range l.books {
		out = append(out, b)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out
}

func (r *root) Book(args struct{ ID gql.ID }) *bookResolver {
	r.l.mu.Lock()
	defer r.l.mu.Unlock()
	if b := r.l.books[string(args.ID)]; b != nil {
		return &bookResolver{r.l, b}
	}
	return nil
}

type bookFilter struct {
	Genre          *string
	TitleContains  *string
	MinPages       *int32
	PublishedAfter *date
	And            *[]*bookFilter
}

func (f *bookFilter) match(b *book) bool {
	if f == nil {
		return true
	}
	if f.Genre != nil && *f.Genre != b.genre ||
		f.TitleContains != nil && !strings.Contains(strings.ToLower(b.title), strings.ToLower(*f.TitleContains)) ||
		f.MinPages != nil && (b.pages == nil || *b.pages < *f.MinPages) ||
		f.PublishedAfter != nil && b.published <= f.PublishedAfter.s {
		return false
	}
	if f.And != nil {
		for _, g := range *f.And {
			if !g.match(b) {
				return false
			}
		}
	}
	return true
}

func (r *root) Books(args struct {
	Filter *bookFilter
	First  int32
}) []*bookResolver {
	r.l.mu.Lock()
	defer r.l.mu.Unlock()
	var out []*bookResolver
	for _, b := range r.l.sortedBooks() {
		if int32(len(out)) >= args.First {
			break
		}
		if args.Filter.match(b) {
			out = append(out, &bookResolver{r.l, b})
		}
	}
	return out
}

func (r *root) Author(args struct{ ID gql.ID }) *authorResolver {
	r.l.mu.Lock()
	defer r.l.mu.Unlock()
	if a := r.l.authors[string(args.ID)]; a != nil {
		return &authorResolver{r.l, a}
	}
	return nil
}

func (r *root) Node(args struct{ ID gql.ID }) *unionResolver {
	if b := r.Book(args); b != nil {
		return &unionResolver{b}
	}
	if a := r.Author(args); a != nil {
		return &unionResolver{a}
	}
	return nil
}

func (r *root) Search(args struct{ Text string }) []*unionResolver {
	r.l.mu.Lock()
	defer r.l.mu.Unlock()
	var out []*unionResolver
	t := strings.ToLower(args.Text)
	for _, b := range r.l.sortedBooks() {
		if strings.Contains(strings.ToLower(b.title), t) {
			out = append(out, &unionResolver{&bookResolver{r.l, b}})
		}
	}
	for _, id := range []string{"a1", "a2", "a3"} {
		if a := r.l.authors[id]; strings.Contains(strings.ToLower(a.name), t) {
			out = append(out, &unionResolver{&authorResolver{r.l, a}})
		}
	}
	return out
}

func (r *root) Broken() (string, error) { return "", errors.New("this field is broken on purpose") }

func (r *root) Echo(args struct {
	Ids   *[]gql.ID
	N     *int32
	X     *float64
	When  *date
	Genre *string
	Flag  *bool
}) string {
	var parts []string
	if args.Ids != nil {
		parts = append(parts, fmt.Sprintf("ids=%q", *args.Ids))
	}
	if args.N != nil {
		parts = append(parts, fmt.Sprintf("n=%d", *args.N))
	}
	if args.X != nil {
		parts = append(parts, fmt.Sprintf("x=%g", *args.X))
	}
	if args.When != nil {
		parts = append(parts, "when="+args.When.s)
	}
	if args.Genre != nil {
		parts = append(parts, "genre="+*args.Genre)
	}
	if args.Flag != nil {
		parts = append(parts, fmt.Sprintf("flag=%v", *args.Flag))
	}
	return strings.Join(parts, " ")
}

func (r *root) Slow(ctx context.Context, args struct{ Ms int32 }) (int32, error) {
	select {
	case <-time.After(time.Duration(args.Ms) * time.Millisecond):
		return args.Ms, nil
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

func (r *root) AddBook(args struct {
	Input struct {
		Title     string
		Genre     string
		AuthorID  gql.ID
		Pages     *int32
		Published *date
		Tags      []string
	}
}) (*bookResolver, error) {
	r.l.mu.Lock()
	defer r.l.mu.Unlock()
	in := args.Input
	if r.l.authors[string(in.AuthorID)] == nil {
		return nil, fmt.Errorf("no author with id %s", in.AuthorID)
	}
	b := &book{id: fmt.Sprint(r.l.next), title: in.Title, genre: in.Genre, author: string(in.AuthorID), pages: in.Pages}
	if in.Published != nil {
		b.published = in.Published.s
	}
	r.l.next++
	r.l.books[b.id] = b
	return &bookResolver{r.l, b}, nil
}

func (r *root) DeleteBook(args struct{ ID gql.ID }) bool {
	r.l.mu.Lock()
	defer r.l.mu.Unlock()
	_, ok := r.l.books[string(args.ID)]
	delete(r.l.books, string(args.ID))
	return ok
}

func (r *root) BookAdded(ctx context.Context, args struct{ Genre *string }) <-chan *bookResolver {
	return make(chan *bookResolver)
}

// upstream is a running test server.
type upstream struct {
	*httptest.Server
	URL string // the GraphQL endpoint

	mu      sync.Mutex
	headers http.Header // of the last request
	bodies  []string
}

func (u *upstream) lastHeader(name string) string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.headers.Get(name)
}

func (u *upstream) requests() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.bodies)
}

func (u *upstream) lastBody() string {
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.bodies) == 0 {
		return ""
	}
	return u.bodies[len(u.bodies)-1]
}

var librarySDL = func() string {
	b, err := os.ReadFile("testdata/library.graphqls")
	if err != nil {
		panic(err)
	}
	return string(b)
}()

// newUpstream serves the library on loopback:
//
//	/graphql          the GraphQL endpoint
//	/secure/graphql   the same, requiring "Authorization: Bearer s3cret-token"
//	                  (else 401 with a GraphQL error body)
//	/closed/graphql   introspection disabled
//	/status/{code}    answers that HTTP status with a text body
//	/html             200 with an HTML page
//	/huge             200 with a 1 MiB JSON document
func newUpstream(t testing.TB) *upstream {
	t.Helper()
	schema := gql.MustParseSchema(librarySDL, &root{newLibrary()}, gql.UseStringDescriptions())
	closed := gql.MustParseSchema(librarySDL, &root{newLibrary()}, gql.UseStringDescriptions(), gql.DisableIntrospection())
	u := &upstream{}
	api := &relay.Handler{Schema: schema}
	record := func(r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(strings.NewReader(string(body)))
		u.mu.Lock()
		u.headers = r.Header.Clone()
		u.bodies = append(u.bodies, string(body))
		u.mu.Unlock()
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /graphql", func(w http.ResponseWriter, r *http.Request) {
		record(r)
		api.ServeHTTP(w, r)
	})
	mux.HandleFunc("POST /secure/graphql", func(w http.ResponseWriter, r *http.Request) {
		record(r)
		if r.Header.Get("Authorization") != "Bearer s3cret-token" {
			w.Header().Set("Content-Type", "application/graphql-response+json")
			w.WriteHeader(http.StatusUnauthorized)
			io.WriteString(w, `{"errors":[{"message":"not authenticated","extensions":{"code":"UNAUTHENTICATED"}}]}`)
			return
		}
		api.ServeHTTP(w, r)
	})
	mux.Handle("POST /closed/graphql", &relay.Handler{Schema: closed})
	mux.HandleFunc("/status/{code}", func(w http.ResponseWriter, r *http.Request) {
		record(r)
		var code int
		fmt.Sscan(r.PathValue("code"), &code)
		w.Header().Set("Content-Type", "text/plain")
		w.Header().Set("Retry-After", "7")
		w.WriteHeader(code)
		io.WriteString(w, "upstream trouble")
	})
	mux.HandleFunc("/html", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		io.WriteString(w, "<html>login page</html>")
	})
	mux.HandleFunc("/huge", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"data":{"x":"`+strings.Repeat("a", 1<<20)+`"}}`)
	})
	u.Server = httptest.NewServer(mux)
	u.URL = u.Server.URL + "/graphql"
	t.Cleanup(u.Close)
	return u
}
