package store

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Live state for operators: what is open in a workspace — MCP sessions,
// stream sessions and jobs — counted with count-only range reads and
// listed a page at a time from key indexes (keys first, then only the
// records of the page), never by scanning records.
//
//	mcp-session-index/<ws>/<digest>  one key per recorded MCP session,
//	                                 named by its MCPSessionDigest, its
//	                                 value the session ID, on the
//	                                 record's lease (workspace
//	                                 path-escaped)
//
// The index is keyed by digest so that neither a page nor its next
// position carries a session ID (a credential), and an operator's stop
// finds the session by the digest the list showed, in one read.
// Releases before it indexed sessions by ID under
// mcp-session-list/<ws>/<id>; this one neither writes nor reads those
// keys, which expire with their sessions' leases.
//
// Open stream sessions and jobs are listed from active/<kind>/<ws>/…, the
// index quotas count.
const mcpSessionIndexDir = "mcp-session-index/"

// MaxLivePage is the most entries one live-state page returns.
const MaxLivePage = 500

func mcpSessionIndexPrefix(workspace string) string {
	return mcpSessionIndexDir + url.PathEscape(workspace) + "/"
}

func mcpSessionIndexKey(workspace, id string) string {
	return mcpSessionIndexPrefix(workspace) + MCPSessionDigest(id)
}

// mcpSessionIndexPut writes a session's index entry on lease.
func mcpSessionIndexPut(workspace, id string, lease clientv3.LeaseID) clientv3.Op {
	return clientv3.OpPut(mcpSessionIndexKey(workspace, id), id, clientv3.WithLease(lease))
}

// LiveCounts counts what is open in a workspace.
type LiveCounts struct {
	// MCPSessions counts the MCP sessions recorded for the workspace (by
	// this release's replicas: sessions recorded by an earlier release
	// are counted once a replica touches them).
	MCPSessions int `json:"mcp_sessions"`
	// StreamSessions and Jobs count the open (not final) ones.
	StreamSessions int `json:"stream_sessions"`
	Jobs           int `json:"jobs"`
}

// CountLive counts a workspace's MCP sessions, open stream sessions and
// open jobs in one transaction of count-only reads.
func (e *Etcd) CountLive(ctx context.Context, workspace string) (LiveCounts, error) {
	var c LiveCounts
	err := e.do(ctx, "count live state of workspace "+workspace, func(ctx context.Context) error {
		count := func(prefix string) clientv3.Op {
			return clientv3.OpGet(prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
		}
		resp, err := e.kv.Txn(ctx).Then(count(mcpSessionIndexPrefix(workspace)),
			count(activeScopePrefix(streamSessionKind.index, workspace)), count(activeScopePrefix(jobKind.index, workspace))).Commit()
		if err != nil {
			return err
		}
		c.MCPSessions = int(resp.Responses[0].GetResponseRange().GetCount())
		c.StreamSessions = int(resp.Responses[1].GetResponseRange().GetCount())
		c.Jobs = int(resp.Responses[2].GetResponseRange().GetCount())
		return nil
	})
	return c, err
}

// pageKeys reads up to limit keys (no values) under prefix after the
// position after (a key suffix returned as a page's next position), and
// returns their suffixes and the next position ("" at the end).
func (e *Etcd) pageKeys(ctx context.Context, op, prefix, after string, limit int) ([]string, string, error) {
	suffixes, _, next, err := e.page(ctx, op, prefix, after, limit, true)
	return suffixes, next, err
}

// page is pageKeys, with the keys' values unless keysOnly.
func (e *Etcd) page(ctx context.Context, op, prefix, after string, limit int, keysOnly bool) ([]string, [][]byte, string, error) {
	if limit <= 0 || limit > MaxLivePage {
		limit = MaxLivePage
	}
	from := prefix
	if after != "" {
		from = prefix + after + "\x00"
	}
	var suffixes []string
	var values [][]byte
	var more bool
	err := e.read(ctx, op, func(ctx context.Context, rd clientv3.KV) error {
		opts := []clientv3.OpOption{clientv3.WithRange(clientv3.GetPrefixRangeEnd(prefix)), clientv3.WithLimit(int64(limit))}
		if keysOnly {
			opts = append(opts, clientv3.WithKeysOnly())
		}
		resp, err := rd.Get(ctx, from, opts...)
		if err != nil {
			return err
		}
		for _, kv := range resp.Kvs {
			suffixes = append(suffixes, strings.TrimPrefix(string(kv.Key), prefix))
			values = append(values, kv.Value)
		}
		more = resp.More
		return nil
	})
	if err != nil {
		return nil, nil, "", err
	}
	next := ""
	if more && len(suffixes) > 0 {
		next = suffixes[len(suffixes)-1]
	}
	return suffixes, values, next, nil
}

// getKeys reads keys in transactions within etcd's operation limit,
// returning a value (nil for an absent key) per key, in order.
func (e *Etcd) getKeys(ctx context.Context, op string, keys []string) ([]*mvccpb.KeyValue, error) {
	out := make([]*mvccpb.KeyValue, 0, len(keys))
	for len(keys) > 0 {
		n := min(len(keys), maxItemsPerTxn)
		ops := make([]clientv3.Op, n)
		for i, k := range keys[:n] {
			ops[i] = clientv3.OpGet(k)
		}
		err := e.read(ctx, op, func(ctx context.Context, rd clientv3.KV) error {
			resp, err := rd.Txn(ctx).Then(ops...).Commit()
			if err != nil {
				return err
			}
			for _, r := range resp.Responses {
				var kv *mvccpb.KeyValue
				if kvs := r.GetResponseRange().GetKvs(); len(kvs) > 0 {
					kv = kvs[0]
				}
				out = append(out, kv)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		keys = keys[n:]
	}
	return out, nil
}

// ListMCPSessions returns a page of the MCP sessions recorded for a
// workspace (in the order of their digests, after the position after)
// and the next position ("" at the end), a digest. Sessions recorded by
// an earlier release are listed once a replica of this one has touched
// them.
func (e *Etcd) ListMCPSessions(ctx context.Context, workspace, after string, limit int) ([]*MCPSession, string, error) {
	op := "list MCP sessions of workspace " + workspace
	suffixes, values, next, err := e.page(ctx, op, mcpSessionIndexPrefix(workspace), after, limit, false)
	if err != nil {
		return nil, "", err
	}
	keys := make([]string, 0, len(suffixes))
	ids := make([]string, 0, len(suffixes))
	for i, s := range suffixes {
		id := string(values[i])
		if !validID(id) || MCPSessionDigest(id) != s {
			continue // not an entry of this index
		}
		ids = append(ids, id)
		keys = append(keys, mcpSessionKey(id))
	}
	kvs, err := e.getKeys(ctx, op, keys)
	if err != nil {
		return nil, "", err
	}
	out := make([]*MCPSession, 0, len(kvs))
	for i, kv := range kvs {
		if kv == nil {
			continue // ended: its entry goes with its lease
		}
		rec, err := decodeMCPSession(ids[i], kv.Value)
		if err != nil || rec.WorkspaceID != workspace {
			continue
		}
		out = append(out, mcpSessionOf(rec))
	}
	return out, next, nil
}

func mcpSessionOf(rec *mcpSessionRecord) *MCPSession {
	return &MCPSession{ID: rec.ID, ProtocolVersion: rec.ProtocolVersion, ClientName: rec.ClientName,
		ClientVersion: rec.ClientVersion, ClientTitle: rec.ClientTitle, Initialized: rec.Initialized,
		LogLevel: rec.LogLevel, WorkspaceID: rec.WorkspaceID, AgentID: rec.AgentID, CreatedAt: rec.CreatedAt,
		TTL: msDur(rec.TTLMillis)}
}

// openIDs pages the open-entity index of a workspace: the IDs of a page
// and the next position.
func (e *Etcd) openIDs(ctx context.Context, kind, workspace, after string, limit int) ([]string, string, error) {
	suffixes, next, err := e.pageKeys(ctx, "list open "+kind+" of workspace "+workspace, activeScopePrefix(kind, workspace), after, limit)
	if err != nil {
		return nil, "", err
	}
	ids := make([]string, 0, len(suffixes))
	for _, s := range suffixes {
		if _, id, ok := strings.Cut(s, "/"); ok {
			ids = append(ids, id)
		}
	}
	return ids, next, nil
}

// ListOpenStreamSessions returns a page of a workspace's open stream
// sessions (active or stopping, of every agent) in index order after the
// position after, and the next position ("" at the end).
func (e *Etcd) ListOpenStreamSessions(ctx context.Context, workspace, after string, limit int) ([]*StreamSession, string, error) {
	return streamSessionKind.listOpen(ctx, e, workspace, after, limit)
}

// ListOpenJobs returns a page of a workspace's open jobs (queued, running
// or canceling, of every agent), like ListOpenStreamSessions.
func (e *Etcd) ListOpenJobs(ctx context.Context, workspace, after string, limit int) ([]*AsyncJobHandle, string, error) {
	return jobKind.listOpen(ctx, e, workspace, after, limit)
}

// OperatorMCPSession returns the MCP session of a workspace with the
// given digest (MCPSessionDigest, as ListMCPSessions pages name them) —
// an operator's read, never a client's — or ErrNotFound: two reads, the
// index entry and the record. A session ID is not a digest: it is not
// found.
func (e *Etcd) OperatorMCPSession(ctx context.Context, workspace, digest string) (*MCPSession, error) {
	if !wellFormedDigest(digest) {
		return nil, ErrNotFound
	}
	key := mcpSessionIndexPrefix(workspace) + digest
	kv, err := e.get(ctx, "get MCP session "+digest, key)
	if err != nil {
		return nil, err
	}
	if kv == nil {
		return nil, ErrNotFound
	}
	id := string(kv.Value)
	if !validID(id) || MCPSessionDigest(id) != digest {
		return nil, fmt.Errorf("store: decode %s: corrupt index entry: it names another session", key)
	}
	s, err := e.GetMCPSession(ctx, id)
	if err != nil {
		return nil, err
	}
	if s.WorkspaceID != workspace {
		return nil, ErrNotFound
	}
	return s, nil
}

// OperatorStreamSession returns a stream session of a workspace whatever
// its agent — an operator's read, never a client's — or ErrNotFound.
func (e *Etcd) OperatorStreamSession(ctx context.Context, workspace, id string) (*StreamSession, error) {
	return streamSessionKind.read(ctx, e, nil, workspace, id)
}

// OperatorJob returns a job of a workspace whatever its agent — an
// operator's read — or ErrNotFound.
func (e *Etcd) OperatorJob(ctx context.Context, workspace, id string) (*AsyncJobHandle, error) {
	return jobKind.read(ctx, e, nil, workspace, id)
}

// ReplicaNames returns the replica names of owner IDs (the names replicas
// registered with, EtcdConfig.ReplicaName); an owner that is gone — its
// replica died or closed — is absent from the map.
func (e *Etcd) ReplicaNames(ctx context.Context, owners []string) (map[string]string, error) {
	seen := map[string]bool{}
	var keys, ids []string
	for _, id := range owners {
		if id == "" || seen[id] || !wellFormedID(id, ownerIDPrefix) {
			continue
		}
		seen[id] = true
		ids = append(ids, id)
		keys = append(keys, ownerKey(id))
	}
	kvs, err := e.getKeys(ctx, "read replica owners", keys)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for i, kv := range kvs {
		if kv == nil {
			continue
		}
		var r ownerRecord
		if decodeRecord("owner", kv.Value, &r) != nil || r.ID != ids[i] {
			continue
		}
		out[ids[i]] = r.Name
		if r.Name == "" {
			out[ids[i]] = fmt.Sprintf("pid %d", r.PID)
		}
	}
	return out, nil
}
