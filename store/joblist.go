package store

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"net/url"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// The job list index: one empty key per job, in the order ListJobs pages
// through, on the job record's lease (written whenever the record moves to
// a new lease, deleted with the record):
//
//	job-list/<workspace>/workspace/<t>/<id>        a job its workspace sees
//	job-list/<workspace>/agent/<agent>/<t>/<id>    an agent-scoped job
//
// with workspace and agent path-escaped and <t> the 19-digit difference
// between math.MaxInt64 and the job's creation time in Unix nanoseconds, so
// that key order is newest first (then by ID). The jobs a caller sees are
// the two ranges of its workspace and agent, merged.
const jobListDir = "job-list/"

// maxListedJobs bounds a ListJobs page.
const maxListedJobs = 1000

// jobListPrefix is the range of the job list index that holds the jobs of
// a workspace (agentScoped false) or of one agent of it.
func jobListPrefix(workspace string, agentScoped bool, agent string) string {
	p := jobListDir + url.PathEscape(workspace) + "/"
	if agentScoped {
		return p + "agent/" + url.PathEscape(agent) + "/"
	}
	return p + "workspace/"
}

// jobListPos is a job's place in the list order, the part of its list
// index key after the range prefix.
func jobListPos(created time.Time, id string) string {
	return fmt.Sprintf("%019d/%s", math.MaxInt64-created.UnixNano(), id)
}

func jobListKey(r *jobRecord) string {
	return jobListPrefix(r.WorkspaceID, r.AgentScoped, r.AgentID) + jobListPos(r.CreatedAt, r.ID)
}

// jobListCursor is the position ListJobs hands out: the creation time and
// ID of the last job of a page, encoded as unpadded base64url JSON.
type jobListCursor struct {
	CreatedAt int64  `json:"c"` // Unix nanoseconds
	ID        string `json:"i"`
}

func (c jobListCursor) String() string {
	b, _ := json.Marshal(c)
	return base64.RawURLEncoding.EncodeToString(b)
}

func parseJobListCursor(s string) (jobListCursor, error) {
	var c jobListCursor
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || json.Unmarshal(raw, &c) != nil || c.CreatedAt <= 0 || !wellFormedID(c.ID, JobIDPrefix) {
		return c, fmt.Errorf("store: %w: after: %q is not a job list position ListJobs returned", ErrInvalid, truncate(s))
	}
	return c, nil
}

// ListJobs returns a page of the unexpired jobs visible to scope, newest
// first (by creation time, then by ID): at most limit of them (1000 when
// limit is 0 or more than that), after the position after — "" for the
// first page, otherwise the next position an earlier page returned. next is
// the position after the page's last job, "" when no job follows it. A
// position stays valid when its job is gone; one ListJobs did not return is
// ErrInvalid.
//
// A page reads the job list index of the caller's workspace and agent a
// range at a time and then the records it names, not every job: its cost
// grows with the page, not with the number of jobs. Jobs written only by
// replicas of a version without the index (created before an upgrade, or by
// a replica not yet upgraded) are not listed until a replica with it
// rewrites them (when it finishes them, for example).
func (e *Etcd) ListJobs(ctx context.Context, scope Scope, after string, limit int) (jobs []*AsyncJobHandle, next string, err error) {
	if limit <= 0 || limit > maxListedJobs {
		limit = maxListedJobs
	}
	var from string
	if after != "" {
		c, err := parseJobListCursor(after)
		if err != nil {
			return nil, "", err
		}
		from = jobListPos(time.Unix(0, c.CreatedAt), c.ID) + "\x00"
	}
	ranges := []*jobListRange{
		newJobListRange(jobListPrefix(scope.WorkspaceID, false, ""), from),
		newJobListRange(jobListPrefix(scope.WorkspaceID, true, scope.AgentID), from),
	}
	now := e.now()
	want := limit + 1 // one more than the page tells whether another follows
	for len(jobs) < want {
		// The next entries in list order, merged from both ranges; an
		// entry whose job is gone or expired is skipped, so read on until
		// the page is full or the ranges end.
		var ids []string
		for len(ids) < want-len(jobs) {
			var first *jobListRange
			for _, r := range ranges {
				if err := e.fill(ctx, r, want-len(jobs)-len(ids)); err != nil {
					return nil, "", err
				}
				if len(r.buf) > 0 && (first == nil || r.buf[0] < first.buf[0]) {
					first = r
				}
			}
			if first == nil {
				break
			}
			pos := first.buf[0]
			first.buf = first.buf[1:]
			ids = append(ids, pos[strings.IndexByte(pos, '/')+1:])
		}
		if len(ids) == 0 {
			break
		}
		kvs, err := e.getJobs(ctx, ids)
		if err != nil {
			return nil, "", err
		}
		for _, kv := range kvs {
			if r, err := jobKind.live(kv, &scope, now); err == nil {
				jobs = append(jobs, r.public(kv.ModRevision))
			}
		}
	}
	if len(jobs) > limit {
		jobs = jobs[:limit]
		last := jobs[limit-1]
		next = jobListCursor{CreatedAt: last.CreatedAt.UnixNano(), ID: last.ID}.String()
	}
	return jobs, next, nil
}

// jobListRange reads one range of the job list index in key order, a batch
// of keys at a time.
type jobListRange struct {
	prefix string
	start  string   // the next key to read from
	end    string   // the range end
	buf    []string // positions read and not taken yet
	done   bool     // nothing left to read
}

func newJobListRange(prefix, from string) *jobListRange {
	return &jobListRange{prefix: prefix, start: prefix + from, end: clientv3.GetPrefixRangeEnd(prefix)}
}

// fill reads up to n more positions into r.buf when it is empty.
func (e *Etcd) fill(ctx context.Context, r *jobListRange, n int) error {
	if len(r.buf) > 0 || r.done {
		return nil
	}
	return e.read(ctx, "list jobs", func(ctx context.Context, rd clientv3.KV) error {
		resp, err := rd.Get(ctx, r.start, clientv3.WithRange(r.end), clientv3.WithKeysOnly(), clientv3.WithLimit(int64(n)))
		if err != nil {
			return err
		}
		for _, kv := range resp.Kvs {
			r.buf = append(r.buf, strings.TrimPrefix(string(kv.Key), r.prefix))
		}
		r.done = !resp.More || len(resp.Kvs) == 0
		if len(resp.Kvs) > 0 {
			r.start = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
		}
		return nil
	})
}

// getJobs reads the records of the jobs ids, in their order (nil where a
// job does not exist), in transactions within etcd's default limit of 128
// operations.
func (e *Etcd) getJobs(ctx context.Context, ids []string) ([]*mvccpb.KeyValue, error) {
	keys := make([]string, len(ids))
	for i, id := range ids {
		keys[i] = jobKind.key(id)
	}
	return e.getKeys(ctx, "list jobs", keys)
}
