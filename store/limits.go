package store

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Fleet-wide rate limits (host/ratelimit). Each replica enforces its
// share of a fleet-wide limit: 1/n of its rate for the n replicas that
// enforce it. Which replicas those are is the one thing the limits keep
// in etcd, and no call touches it:
//
//	limits/<limit id>/<owner id>   on the replica's owner lease
//
// A replica puts its key when it starts enforcing the limit (JoinLimit)
// and deletes it when it stops (LeaveLimit); the key goes with the owner
// lease when the replica stops or dies (after the owner TTL, for one
// killed), and every replica watches limits/ (WatchLimitMembers) to
// recompute its share.
const limitsDir = "limits/"

// validLimitID checks what a limit's ID may be: a key segment.
func validLimitID(id string) error {
	if id == "" || len(id) > 64 || strings.ContainsAny(id, "/\x00") {
		return fmt.Errorf("store: %w: limit id %q must be 1-64 characters without /", ErrInvalid, id)
	}
	return nil
}

func limitMemberKey(id, owner string) string { return limitsDir + id + "/" + owner }

// JoinLimit makes this replica a member of the fleet-wide limit id: a key
// on its owner lease (registering the owner when it has none). Joining
// again is free while the owner registration that joined lives; after it
// was lost, it joins again.
func (e *Etcd) JoinLimit(ctx context.Context, id string) error {
	if err := validLimitID(id); err != nil {
		return err
	}
	o, err := e.owner(ctx)
	if err != nil {
		return err
	}
	o.leaderMu.Lock()
	defer o.leaderMu.Unlock()
	if o.limits[id] {
		return nil
	}
	err = e.do(ctx, "join limit", func(ctx context.Context) error {
		_, err := e.kv.Put(ctx, limitMemberKey(id, o.id), "", clientv3.WithLease(o.session.Lease()))
		return err
	})
	if err == nil {
		o.limits[id] = true
	}
	return err
}

// LeaveLimit ends this replica's membership of the limit id, if any.
func (e *Etcd) LeaveLimit(ctx context.Context, id string) error {
	if err := validLimitID(id); err != nil {
		return err
	}
	o := e.currentOwner()
	if o == nil {
		return nil
	}
	o.leaderMu.Lock()
	defer o.leaderMu.Unlock()
	if !o.limits[id] {
		return nil
	}
	err := e.do(ctx, "leave limit", func(ctx context.Context) error {
		_, err := e.kv.Delete(ctx, limitMemberKey(id, o.id))
		return err
	})
	if err == nil {
		delete(o.limits, id)
	}
	return err
}

// WatchLimitMembers calls members with the owner IDs of the members of
// every fleet-wide limit, by limit ID: once with what etcd holds, then
// after every change, until ctx ends or the Etcd closes (it returns nil
// then). It reads again and watches again after a watch error
// (compaction, a lost leader, etcd down: resumeWatch), meanwhile keeping
// the last members. members runs on the watch's goroutine and owns its
// map.
func (e *Etcd) WatchLimitMembers(ctx context.Context, members func(map[string][]string)) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(e.bgCtx, cancel)
	defer stop()
	var cur map[string]map[string]bool
	read := func() (int64, bool, error) {
		m, rev, err := e.limitMembers(ctx)
		if err != nil {
			return 0, ctx.Err() == nil, err
		}
		cur = m
		members(limitMemberLists(cur))
		return rev, true, nil
	}
	rev, ok, err := read()
	for failures := 1; err != nil && ok; failures++ {
		if !watchBackoff.Wait(ctx, failures) {
			return nil
		}
		rev, ok, err = read()
	}
	if err != nil {
		return nil
	}
	e.resumeWatch(ctx, limitsDir, rev, []clientv3.OpOption{clientv3.WithPrefix()}, func(ev *clientv3.Event) bool {
		id, owner, ok := strings.Cut(strings.TrimPrefix(string(ev.Kv.Key), limitsDir), "/")
		if !ok {
			return true
		}
		if ev.Type == mvccpb.DELETE {
			delete(cur[id], owner)
		} else {
			if cur[id] == nil {
				cur[id] = map[string]bool{}
			}
			cur[id][owner] = true
		}
		members(limitMemberLists(cur))
		return true
	}, read)
	return nil
}

// limitMembers reads the members of every limit and the revision read.
func (e *Etcd) limitMembers(ctx context.Context) (map[string]map[string]bool, int64, error) {
	out := map[string]map[string]bool{}
	var rev int64
	err := e.read(ctx, "read limit members", func(ctx context.Context, rd clientv3.KV) error {
		resp, err := rd.Get(ctx, limitsDir, clientv3.WithPrefix(), clientv3.WithKeysOnly())
		if err != nil {
			return err
		}
		rev = resp.Header.GetRevision()
		for _, kv := range resp.Kvs {
			if id, owner, ok := strings.Cut(strings.TrimPrefix(string(kv.Key), limitsDir), "/"); ok {
				if out[id] == nil {
					out[id] = map[string]bool{}
				}
				out[id][owner] = true
			}
		}
		return nil
	})
	return out, rev, err
}

func limitMemberLists(m map[string]map[string]bool) map[string][]string {
	out := make(map[string][]string, len(m))
	for id, owners := range m {
		if len(owners) > 0 {
			out[id] = slices.Sorted(maps.Keys(owners))
		}
	}
	return out
}
