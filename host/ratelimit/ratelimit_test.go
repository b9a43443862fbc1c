package ratelimit

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestParseRate(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in   string
		want Rate
		err  string
	}{
		{"10/m", Rate{10, time.Minute}, ""},
		{"100/s", Rate{100, time.Second}, ""},
		{"5/30s", Rate{5, 30 * time.Second}, ""},
		{"0.5/h", Rate{0.5, time.Hour}, ""},
		{"10", Rate{}, "must be <n>/<period>"},
		{"0/s", Rate{}, "over 0"},
		{"-1/s", Rate{}, "over 0"},
		{"1/fortnight", Rate{}, "the period must be s, m, h"},
		{"1/48h", Rate{}, "from 1ms to 24h0m0s"},
		{"2000000/s", Rate{}, "at most 1000000"},
	} {
		got, err := ParseRate(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("ParseRate(%q) = %v, %v; want an error with %q", c.in, got, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("ParseRate(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
	if s := (Rate{10, time.Minute}).String(); s != "10 calls a minute" {
		t.Errorf("String = %q", s)
	}
}

// Check names the field of every problem.
func TestCheck(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		l    Limit
		want []string
	}{
		{Limit{Name: "ok", Rate: "10/m", Per: "user", Tool: "refund_*"}, nil},
		{Limit{}, []string{"name: is required", "rate: is required"}},
		{Limit{Name: "a b", Rate: "x"}, []string{"name: must be", "rate: must be <n>/<period>"}},
		{Limit{Name: "n", Rate: "1/s", Per: "team"}, []string{"per: must be one of workspace, user, agent, client, address"}},
		{Limit{Name: "n", Rate: "1/s", Tool: "a", Upstream: "b.example"}, []string{"upstream: a limit has one scope: it sets tool already"}},
		{Limit{Name: "n", Rate: "1/s", Tool: "[a"}, []string{"tool: must be a tool name or a glob"}},
		{Limit{Name: "n", Rate: "1/s", Upstream: "ftp://x"}, []string{"upstream: "}},
		{Limit{Name: "n", Rate: "1/s", Burst: -1}, []string{"burst: must be from 1"}},
	} {
		var got []string
		for _, p := range c.l.Check() {
			got = append(got, p.Error())
		}
		if len(got) != len(c.want) {
			t.Errorf("%+v: %q, want %q", c.l, got, c.want)
			continue
		}
		for i := range got {
			if !strings.HasPrefix(got[i], c.want[i]) {
				t.Errorf("%+v: %q, want %q", c.l, got[i], c.want[i])
			}
		}
	}
}

// Decode reports unknown fields and wrong types with their names, then
// Check's problems.
func TestDecode(t *testing.T) {
	t.Parallel()
	if _, ps := Decode(json.RawMessage(`{"name":"x","rate":"1/s","burts":2}`)); len(ps) != 1 || ps[0].Field != "burts" {
		t.Errorf("unknown field: %v", ps)
	}
	if _, ps := Decode(json.RawMessage(`{"name":"x","rate":"1/s","per":"team"}`)); len(ps) != 1 || ps[0].Field != "per" {
		t.Errorf("enum: %v", ps)
	}
	if l, ps := Decode(json.RawMessage(`{"name":"x","rate":"1/s","fleet":true}`)); ps != nil || !l.Fleet {
		t.Errorf("good limit: %+v %v", l, ps)
	}
	var s map[string]any
	if err := json.Unmarshal(Schema(), &s); err != nil || s["title"] != "Rate limit" {
		t.Fatalf("schema: %v %v", s, err)
	}
	req, _ := s["required"].([]any)
	if !slices.Equal(req, []any{"name", "rate"}) {
		t.Errorf("required = %v", req)
	}
}

// A limit's scope matches tools by name or glob, family, toolset and
// upstream; none matches every tool.
func TestApplies(t *testing.T) {
	t.Parallel()
	refund := Tool{Name: "refund_create", Family: "", Upstreams: []string{"https://api.stripe.com/v1/refunds"},
		InToolset: func(s string) bool { return s == "payments" }}
	job := Tool{Name: "report_status", Family: "report", Upstreams: []string{"http://10.1.2.3:8080/reports"}}
	for _, c := range []struct {
		l          Limit
		refund, jb bool
	}{
		{Limit{}, true, true},
		{Limit{Tool: "refund_*"}, true, false},
		{Limit{Tool: "refund_create"}, true, false},
		{Limit{Family: "report"}, false, true},
		{Limit{Toolset: "payments"}, true, false},
		{Limit{Upstream: "api.stripe.com"}, true, false},
		{Limit{Upstream: "*.stripe.com"}, true, false},
		{Limit{Upstream: "10.0.0.0/8"}, false, true},
	} {
		if got := c.l.Applies(refund); got != c.refund {
			t.Errorf("%+v applies to refund_create: %v", c.l, got)
		}
		if got := c.l.Applies(job); got != c.jb {
			t.Errorf("%+v applies to report_status: %v", c.l, got)
		}
	}
}

// A bucket holds the burst, refills at the rate, and a refusal says when
// the next call fits; keyed budgets keep a bucket per key.
func TestBudget(t *testing.T) {
	t.Parallel()
	b := NewBudget(Limit{Name: "per_user", Rate: "2/s", Burst: 3, Per: PerUser})
	alice, bob := &Caller{User: "alice"}, &Caller{User: "bob"}
	for i := range 3 {
		if r := b.Admit(alice); r != nil {
			t.Fatalf("call %d refused: %v", i, r)
		}
	}
	r := b.Admit(alice)
	if r == nil {
		t.Fatal("the fourth call passed")
	}
	if !errors.Is(r, ErrLimited) || r.RetryAfter <= 0 || r.RetryAfter > 500*time.Millisecond || r.RetryAfterSeconds() != 1 ||
		r.Limit != "per_user" || r.Scope != ScopeEndpoint {
		t.Errorf("refusal %+v", r)
	}
	if want := "rate limit per_user reached: at most 2 calls a second per user, on each replica; retry in 1s"; r.Error() != want {
		t.Errorf("message %q, want %q", r.Error(), want)
	}
	if r := b.Admit(bob); r != nil {
		t.Errorf("bob refused by alice's calls: %v", r)
	}
	// Refill: half a second later alice has one call again.
	b.mu.Lock()
	t0, _ := b.keyed.Get("alice")
	t0.at -= int64(600 * time.Millisecond)
	b.mu.Unlock()
	if r := b.Admit(alice); r != nil {
		t.Errorf("alice after a refill: %v", r)
	}
	st := b.State()
	if st.Keys != 2 || st.Admitted != 5 || st.Refused != 1 {
		t.Errorf("state %+v", st)
	}
}

// All limits of a set must pass; a refused call spends nothing of the
// limits before the one that refused it.
func TestSetRefunds(t *testing.T) {
	t.Parallel()
	wide := NewBudget(Limit{Name: "wide", Rate: "100/s"})
	narrow := NewBudget(Limit{Name: "narrow", Rate: "1/h", Per: PerAgent})
	s := Set{wide, narrow}
	c := &Caller{Agent: "a"}
	if r := s.Admit(c); r != nil {
		t.Fatal(r)
	}
	for range 10 {
		if r := s.Admit(c); r == nil || r.Limit != "narrow" {
			t.Fatalf("want narrow's refusal, got %v", r)
		}
	}
	if st := wide.State(); st.Admitted != 1 {
		t.Errorf("wide admitted %d, want 1", st.Admitted)
	}
	wide.mu.Lock()
	tokens := wide.single.tokens
	wide.mu.Unlock()
	if tokens < 98.9 {
		t.Errorf("wide holds %v tokens: the refused calls spent them", tokens)
	}
}

// Budgets share a limit's budget between its holders by definition, and
// forget it with the last release.
func TestBudgetsShare(t *testing.T) {
	t.Parallel()
	bs := NewBudgets()
	l := Limit{Name: "x", Rate: "1/h"}
	a, b := bs.Acquire(l), bs.Acquire(l)
	if a != b {
		t.Fatal("two budgets for one limit")
	}
	if c := bs.Acquire(Limit{Name: "x", Rate: "2/h"}); c == a {
		t.Fatal("one budget for two definitions")
	}
	if r := a.Admit(&Caller{}); r != nil {
		t.Fatal(r)
	}
	if r := b.Admit(&Caller{}); r == nil {
		t.Fatal("the second holder's call passed: not shared")
	}
	bs.Release(a)
	if len(bs.States()) != 2 {
		t.Errorf("states %+v", bs.States())
	}
	bs.Release(b)
	if st := bs.States(); len(st) != 1 || st[0].Rate != "2/h" {
		t.Errorf("after the last release: %+v", st)
	}
}

// fakeFleet is a Fleet of several replicas in memory.
type fakeFleet struct {
	mu       sync.Mutex
	members  map[string]map[string]bool // limit → owner IDs
	watchers []func(map[string][]string)
}

type fakeReplica struct {
	fleet *fakeFleet
	owner string
}

func (f *fakeFleet) notify() {
	m := map[string][]string{}
	for id, os := range f.members {
		for o := range os {
			m[id] = append(m[id], o)
		}
	}
	for _, w := range f.watchers {
		w(m)
	}
}

func (r *fakeReplica) JoinLimit(_ context.Context, id string) error {
	r.fleet.mu.Lock()
	defer r.fleet.mu.Unlock()
	if r.fleet.members[id] == nil {
		r.fleet.members[id] = map[string]bool{}
	}
	if !r.fleet.members[id][r.owner] {
		r.fleet.members[id][r.owner] = true
		r.fleet.notify()
	}
	return nil
}

func (r *fakeReplica) LeaveLimit(_ context.Context, id string) error {
	r.fleet.mu.Lock()
	defer r.fleet.mu.Unlock()
	delete(r.fleet.members[id], r.owner)
	r.fleet.notify()
	return nil
}

// die drops every membership of the replica, as its lease's expiry does.
func (r *fakeReplica) die() {
	r.fleet.mu.Lock()
	defer r.fleet.mu.Unlock()
	for _, m := range r.fleet.members {
		delete(m, r.owner)
	}
	r.fleet.notify()
}

func (r *fakeReplica) WatchLimitMembers(ctx context.Context, members func(map[string][]string)) error {
	r.fleet.mu.Lock()
	r.fleet.watchers = append(r.fleet.watchers, members)
	r.fleet.notify()
	r.fleet.mu.Unlock()
	<-ctx.Done()
	return ctx.Err()
}

func (r *fakeReplica) OwnerID() string { return r.owner }

// A fleet-wide limit's replicas each enforce their share: 1/n of the
// rate and burst for the n replicas that hold it, recomputed as replicas
// join and die.
func TestFleetShares(t *testing.T) {
	t.Parallel()
	f := &fakeFleet{members: map[string]map[string]bool{}}
	l := Limit{Name: "stripe", Rate: "30/s", Burst: 30, Fleet: true}
	var regs []*Budgets
	var budgets []*Budget
	var reps []*fakeReplica
	for i := range 3 {
		bs := NewBudgets()
		rep := &fakeReplica{fleet: f, owner: string(rune('a' + i))}
		bs.Coordinate(rep, nil)
		t.Cleanup(bs.StopCoordinating)
		regs, reps = append(regs, bs), append(reps, rep)
		budgets = append(budgets, bs.Acquire(l))
	}
	members := func(want int64) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for _, b := range budgets {
			for b.members.Load() != want {
				if time.Now().After(deadline) {
					t.Fatalf("members %d, want %d", b.members.Load(), want)
				}
				time.Sleep(5 * time.Millisecond)
			}
		}
	}
	members(3)
	admitted := 0
	for _, b := range budgets {
		for b.Admit(&Caller{}) == nil {
			admitted++
		}
	}
	if admitted != 30 {
		t.Errorf("the fleet admitted %d calls at once, want its burst 30", admitted)
	}
	if st := regs[0].States(); len(st) != 1 || st[0].Members != 3 || st[0].Share < 0.33 || st[0].Share > 0.34 {
		t.Errorf("state %+v", st)
	}
	regs[2].StopCoordinating()
	reps[2].die()
	budgets = budgets[:2]
	members(2)
	// A release leaves the fleet.
	regs[1].Release(budgets[1])
	budgets = budgets[:1]
	members(1)
}

// BenchmarkAdmit is the limiter's own cost per call: three limits (one
// bucket for all, one per user, one per client among 1000 clients), all
// passing, from parallel callers.
func BenchmarkAdmit(b *testing.B) {
	s := Set{NewBudget(Limit{Name: "all", Rate: "1000000/s"}), NewBudget(Limit{Name: "user", Rate: "1000000/s", Per: PerUser}),
		NewBudget(Limit{Name: "client", Rate: "1000000/s", Per: PerClient})}
	callers := make([]Caller, 1000)
	for i := range callers {
		callers[i] = Caller{User: "user:u" + string(rune('a'+i%26)), Client: "addr:10.0.0." + string(rune('0'+i%10)) + string(rune('0'+i/10%10))}
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			if r := s.Admit(&callers[i%len(callers)]); r != nil {
				b.Fatal(r)
			}
			i++
		}
	})
}
