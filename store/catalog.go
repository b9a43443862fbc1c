package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Operations catalogs: named sets of operations (an operations file held in
// etcd) that crank handlers serve beside or instead of their files. Every
// change writes a new version; versions are keys of their own, so etcd's
// compaction of key history never loses one, and a catalog keeps its last
// CatalogWrite.Keep versions.
//
//	catalogs/<name>                      the head: current version, when,
//	                                     by whom, how many operations
//	catalog-versions/<name>/<v>          one version's metadata (who, when,
//	                                     message, action, changes), <v> 20
//	                                     zero-padded digits
//	catalog-documents/<name>/<v>         that version's document, as the
//	                                     operator wrote it (placeholders
//	                                     unexpanded)
//
// No lease: catalogs live until purged.
const (
	catalogHeadsDir     = "catalogs/"
	catalogVersionsDir  = "catalog-versions/"
	catalogDocumentsDir = "catalog-documents/"
)

// Catalog history bounds.
const (
	// DefaultCatalogHistory is how many versions a catalog keeps when
	// CatalogWrite.Keep is zero.
	DefaultCatalogHistory = 100
	// MaxCatalogHistory is the most versions a catalog may keep.
	MaxCatalogHistory = 10000
	// AnyVersion as CatalogWrite.Expect writes whatever the current version
	// is (a blind write).
	AnyVersion int64 = -1
	// maxCatalogChanges bounds the changes a version records.
	maxCatalogChanges = 1000
)

var catalogNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)

// ValidCatalogName reports whether name can name a catalog: 1-64
// characters of A-Z a-z 0-9 _ . -, starting with a letter or digit.
func ValidCatalogName(name string) bool { return catalogNameRE.MatchString(name) }

func catalogHeadKey(name string) string { return catalogHeadsDir + name }
func catalogVersionsPrefix(name string) string {
	return catalogVersionsDir + name + "/"
}
func catalogDocumentsPrefix(name string) string {
	return catalogDocumentsDir + name + "/"
}
func catalogVersionKey(name string, v int64) string {
	return fmt.Sprintf("%s%020d", catalogVersionsPrefix(name), v)
}
func catalogDocumentKey(name string, v int64) string {
	return fmt.Sprintf("%s%020d", catalogDocumentsPrefix(name), v)
}

// CatalogChange is what one version did to one operation.
type CatalogChange struct {
	Operation string `json:"operation"`
	// Change is "added", "changed" or "removed".
	Change string `json:"change"`
}

// CatalogHead is a catalog's current state.
type CatalogHead struct {
	Catalog string    `json:"catalog"`
	Version int64     `json:"version"`
	Time    time.Time `json:"time"`
	Author  string    `json:"author"`
	// Deleted: the current version is a deletion (it has no operations);
	// the history stays until the catalog is purged.
	Deleted bool `json:"deleted,omitempty"`
	// Operations counts the entries of the current document.
	Operations int `json:"operations"`
	// Oldest is the oldest version still kept.
	Oldest  int64     `json:"oldest"`
	Created time.Time `json:"created"`
	// Revision is the etcd mod revision of the head as read.
	Revision int64 `json:"-"`
}

// CatalogVersion is one version of a catalog: who wrote it, when, why,
// what it changed and (when read with its document) its content.
type CatalogVersion struct {
	Catalog string    `json:"catalog"`
	Version int64     `json:"version"`
	Time    time.Time `json:"time"`
	Author  string    `json:"author"`
	// Operator is the name the writer's client gave (unverified: a
	// claim, unlike Author).
	Operator string `json:"operator,omitempty"`
	Message  string `json:"message,omitempty"`
	// Action is what made the version: create, replace, import, patch,
	// delete, rollback, rate_limits (the caller's word, stored as given).
	Action string `json:"action"`
	// RollbackOf is the version a rollback restored.
	RollbackOf int64           `json:"rollback_of,omitempty"`
	Changes    []CatalogChange `json:"changes,omitempty"`
	Deleted    bool            `json:"deleted,omitempty"`
	Operations int             `json:"operations"`
	// Document is the catalog's content (an operations file in JSON);
	// nil when the version was listed rather than read.
	Document json.RawMessage `json:"-"`
}

// CatalogWrite is one change of a catalog.
type CatalogWrite struct {
	Catalog string
	// Expect is the version the writer read: the write fails with a
	// *CatalogConflictError when the catalog is at another one. 0 expects
	// no catalog (or one whose current version is a deletion); AnyVersion
	// writes over whatever is there.
	Expect     int64
	Author     string
	Operator   string
	Message    string
	Action     string
	RollbackOf int64
	Changes    []CatalogChange
	Deleted    bool
	Operations int
	// Document is the new content, valid JSON.
	Document json.RawMessage
	// Keep is how many versions to keep, this one included
	// (DefaultCatalogHistory when zero).
	Keep int
}

// CatalogConflictError reports a write whose expected version is not the
// catalog's current one: someone else changed it since the writer read
// it. It matches ErrConflict.
type CatalogConflictError struct {
	Catalog  string
	Expected int64
	Current  int64 // 0: the catalog does not exist
	Deleted  bool  // the current version is a deletion
}

func (e *CatalogConflictError) Error() string {
	switch {
	case e.Current == 0:
		return fmt.Sprintf("store: catalog %s does not exist (expected version %d)", e.Catalog, e.Expected)
	case e.Expected == 0:
		return fmt.Sprintf("store: catalog %s already exists at version %d", e.Catalog, e.Current)
	}
	return fmt.Sprintf("store: catalog %s is at version %d, not %d: it changed since it was read", e.Catalog, e.Current, e.Expected)
}

// Is makes errors.Is(err, ErrConflict) true.
func (e *CatalogConflictError) Is(target error) bool { return target == ErrConflict }

type catalogHeadRecord struct {
	Catalog    string    `json:"catalog"`
	Version    int64     `json:"version"`
	Time       time.Time `json:"time"`
	Author     string    `json:"author,omitempty"`
	Deleted    bool      `json:"deleted,omitempty"`
	Operations int       `json:"operations"`
	Oldest     int64     `json:"oldest"`
	Created    time.Time `json:"created"`
}

func decodeCatalogHead(name string, kv *mvccpb.KeyValue) (*CatalogHead, error) {
	var r catalogHeadRecord
	if err := decodeRecord("catalog "+name, kv.Value, &r); err != nil {
		return nil, err
	}
	if r.Catalog != name || r.Version <= 0 || r.Oldest <= 0 || r.Oldest > r.Version {
		return nil, fmt.Errorf("store: decode catalog %s: corrupt head record (catalog %q, version %d, oldest %d)",
			name, truncate(r.Catalog), r.Version, r.Oldest)
	}
	return &CatalogHead{Catalog: r.Catalog, Version: r.Version, Time: r.Time, Author: r.Author, Deleted: r.Deleted,
		Operations: r.Operations, Oldest: r.Oldest, Created: r.Created, Revision: kv.ModRevision}, nil
}

func decodeCatalogVersion(name string, v int64, val []byte) (*CatalogVersion, error) {
	var r CatalogVersion
	if err := decodeRecord(fmt.Sprintf("catalog %s version %d", name, v), val, &r); err != nil {
		return nil, err
	}
	if r.Catalog != name || r.Version != v {
		return nil, fmt.Errorf("store: decode catalog %s version %d: corrupt record (it names catalog %q version %d)",
			name, v, truncate(r.Catalog), r.Version)
	}
	return &r, nil
}

func checkCatalogName(name string) error {
	if !ValidCatalogName(name) {
		return fmt.Errorf("store: %w: catalog name %q: must be 1-64 characters of A-Z a-z 0-9 _ . -, starting with a letter or digit",
			ErrInvalid, truncate(name))
	}
	return nil
}

// PutCatalog writes a new version of a catalog (creating it at version
// 1): the head, the version's metadata and document, and the deletion of
// versions beyond w.Keep, in one compare-and-swap transaction on the
// head. A write whose w.Expect is not the current version fails with a
// *CatalogConflictError (nothing is written); so two operators who read
// the same version cannot both write the next one.
func (e *Etcd) PutCatalog(ctx context.Context, w CatalogWrite) (*CatalogHead, error) {
	if err := checkCatalogName(w.Catalog); err != nil {
		return nil, err
	}
	keep := w.Keep
	if keep == 0 {
		keep = DefaultCatalogHistory
	}
	if keep < 1 || keep > MaxCatalogHistory {
		return nil, fmt.Errorf("store: %w: catalog history must keep 1-%d versions, got %d", ErrInvalid, MaxCatalogHistory, keep)
	}
	if !json.Valid(w.Document) {
		return nil, fmt.Errorf("store: %w: catalog %s: the document is not valid JSON", ErrInvalid, w.Catalog)
	}
	if len(w.Changes) > maxCatalogChanges {
		w.Changes = w.Changes[:maxCatalogChanges]
	}
	for _, f := range []struct{ name, v string }{{"author", w.Author}, {"operator", w.Operator}, {"message", w.Message}, {"action", w.Action}} {
		if len(f.v) > 4096 {
			return nil, fmt.Errorf("store: %w: catalog %s: %s is longer than 4096 bytes", ErrInvalid, w.Catalog, f.name)
		}
	}
	if len(w.Document) > e.maxValue {
		return nil, &TooLargeError{What: "catalog " + w.Catalog + " document", Size: len(w.Document), Limit: e.maxValue,
			Why: "one etcd request (max_request_bytes) less the store's overhead"}
	}
	op := "write catalog " + w.Catalog
	var head *CatalogHead
	_, err := e.cas(ctx, op, catalogHeadKey(w.Catalog), func(kv *mvccpb.KeyValue, p *plan) error {
		var cur *CatalogHead
		if kv != nil {
			var err error
			if cur, err = decodeCatalogHead(w.Catalog, kv); err != nil {
				return err
			}
		}
		curVersion, deleted := int64(0), false
		if cur != nil {
			curVersion, deleted = cur.Version, cur.Deleted
		}
		switch {
		case w.Expect == AnyVersion:
		case w.Expect == 0 && (cur == nil || cur.Deleted):
		case w.Expect != curVersion:
			return &CatalogConflictError{Catalog: w.Catalog, Expected: w.Expect, Current: curVersion, Deleted: deleted}
		}
		now := e.now().UTC()
		next := curVersion + 1
		rec := catalogHeadRecord{Catalog: w.Catalog, Version: next, Time: now, Author: w.Author, Deleted: w.Deleted,
			Operations: w.Operations, Oldest: max(1, next-int64(keep)+1), Created: now}
		if cur != nil {
			rec.Created = cur.Created
			rec.Oldest = max(cur.Oldest, rec.Oldest)
		}
		ver := CatalogVersion{Catalog: w.Catalog, Version: next, Time: now, Author: w.Author, Operator: w.Operator, Message: w.Message,
			Action: w.Action, RollbackOf: w.RollbackOf, Changes: w.Changes, Deleted: w.Deleted, Operations: w.Operations}
		hv, _ := e.encodeRecord(rec)
		vv, _ := e.encodeRecord(ver)
		if err := p.put(catalogHeadKey(w.Catalog), hv, 0); err != nil {
			return err
		}
		if err := p.put(catalogVersionKey(w.Catalog, next), vv, 0); err != nil {
			return err
		}
		if err := p.put(catalogDocumentKey(w.Catalog, next), w.Document, 0); err != nil {
			return err
		}
		if cur != nil && rec.Oldest > cur.Oldest {
			// Versions before the oldest kept go, metadata and documents.
			p.del(catalogVersionKey(w.Catalog, 0), clientv3.WithRange(catalogVersionKey(w.Catalog, rec.Oldest)))
			p.del(catalogDocumentKey(w.Catalog, 0), clientv3.WithRange(catalogDocumentKey(w.Catalog, rec.Oldest)))
		}
		head = &CatalogHead{Catalog: rec.Catalog, Version: rec.Version, Time: rec.Time, Author: rec.Author, Deleted: rec.Deleted,
			Operations: rec.Operations, Oldest: rec.Oldest, Created: rec.Created}
		return nil
	})
	if err != nil {
		var ce *CatalogConflictError
		if errors.As(err, &ce) {
			return nil, ce
		}
		return nil, err
	}
	return head, nil
}

// GetCatalog returns a catalog's head and its current version with its
// document, or ErrNotFound when the catalog does not exist.
func (e *Etcd) GetCatalog(ctx context.Context, name string) (*CatalogHead, *CatalogVersion, error) {
	if err := checkCatalogName(name); err != nil {
		return nil, nil, err
	}
	for attempt := 0; ; attempt++ {
		head, err := e.GetCatalogHead(ctx, name)
		if err != nil {
			return nil, nil, err
		}
		v, err := e.GetCatalogVersion(ctx, name, head.Version)
		if errors.Is(err, ErrNotFound) && attempt < 3 {
			continue // pruned by a write in between: read the new head
		}
		if err != nil {
			return nil, nil, err
		}
		return head, v, nil
	}
}

// GetCatalogHead returns a catalog's head, or ErrNotFound.
func (e *Etcd) GetCatalogHead(ctx context.Context, name string) (*CatalogHead, error) {
	if err := checkCatalogName(name); err != nil {
		return nil, err
	}
	kv, err := e.get(ctx, "read catalog "+name, catalogHeadKey(name))
	if err != nil {
		return nil, err
	}
	if kv == nil {
		return nil, ErrNotFound
	}
	return decodeCatalogHead(name, kv)
}

// GetCatalogVersion returns one version of a catalog with its document,
// or ErrNotFound when the catalog or the version is not kept.
func (e *Etcd) GetCatalogVersion(ctx context.Context, name string, version int64) (*CatalogVersion, error) {
	if err := checkCatalogName(name); err != nil {
		return nil, err
	}
	if version <= 0 {
		return nil, ErrNotFound
	}
	var meta, doc *mvccpb.KeyValue
	err := e.read(ctx, fmt.Sprintf("read catalog %s version %d", name, version), func(ctx context.Context, rd clientv3.KV) error {
		resp, err := rd.Txn(ctx).Then(clientv3.OpGet(catalogVersionKey(name, version)),
			clientv3.OpGet(catalogDocumentKey(name, version))).Commit()
		if err != nil {
			return err
		}
		if kvs := resp.Responses[0].GetResponseRange().GetKvs(); len(kvs) > 0 {
			meta = kvs[0]
		}
		if kvs := resp.Responses[1].GetResponseRange().GetKvs(); len(kvs) > 0 {
			doc = kvs[0]
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if meta == nil || doc == nil {
		return nil, ErrNotFound
	}
	v, err := decodeCatalogVersion(name, version, meta.Value)
	if err != nil {
		return nil, err
	}
	if !json.Valid(doc.Value) {
		return nil, fmt.Errorf("store: decode catalog %s version %d: the document is not JSON", name, version)
	}
	v.Document = doc.Value
	return v, nil
}

// ListCatalogVersions returns up to limit versions of a catalog (without
// their documents), newest first, older than before (0: from the
// current one), and the position of the next page (0 when there is
// none). It reads only the versions' metadata.
func (e *Etcd) ListCatalogVersions(ctx context.Context, name string, before int64, limit int) ([]*CatalogVersion, int64, error) {
	if err := checkCatalogName(name); err != nil {
		return nil, 0, err
	}
	if limit <= 0 {
		limit = 50
	}
	end := clientv3.GetPrefixRangeEnd(catalogVersionsPrefix(name))
	if before > 0 {
		end = catalogVersionKey(name, before)
	}
	var kvs []*mvccpb.KeyValue
	var more bool
	err := e.read(ctx, "list catalog "+name+" versions", func(ctx context.Context, rd clientv3.KV) error {
		resp, err := rd.Get(ctx, catalogVersionsPrefix(name), clientv3.WithRange(end),
			clientv3.WithSort(clientv3.SortByKey, clientv3.SortDescend), clientv3.WithLimit(int64(limit)))
		if err != nil {
			return err
		}
		kvs, more = resp.Kvs, resp.More
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	out := make([]*CatalogVersion, 0, len(kvs))
	for _, kv := range kvs {
		n, err := strconv.ParseInt(strings.TrimPrefix(string(kv.Key), catalogVersionsPrefix(name)), 10, 64)
		if err != nil {
			return nil, 0, fmt.Errorf("store: catalog %s: corrupt version key %q", name, truncate(string(kv.Key)))
		}
		v, err := decodeCatalogVersion(name, n, kv.Value)
		if err != nil {
			return nil, 0, err
		}
		out = append(out, v)
	}
	var next int64
	if more && len(out) > 0 {
		next = out[len(out)-1].Version
	}
	return out, next, nil
}

// ListCatalogs returns up to limit catalog heads in name order, after the
// name after, and the name to pass for the next page ("" when there is
// none).
func (e *Etcd) ListCatalogs(ctx context.Context, after string, limit int) ([]*CatalogHead, string, error) {
	if limit <= 0 {
		limit = 100
	}
	from := catalogHeadsDir
	if after != "" {
		from = catalogHeadKey(after) + "\x00"
	}
	var kvs []*mvccpb.KeyValue
	var more bool
	err := e.read(ctx, "list catalogs", func(ctx context.Context, rd clientv3.KV) error {
		resp, err := rd.Get(ctx, from, clientv3.WithRange(clientv3.GetPrefixRangeEnd(catalogHeadsDir)),
			clientv3.WithLimit(int64(limit)))
		if err != nil {
			return err
		}
		kvs, more = resp.Kvs, resp.More
		return nil
	})
	if err != nil {
		return nil, "", err
	}
	out := make([]*CatalogHead, 0, len(kvs))
	for _, kv := range kvs {
		h, err := decodeCatalogHead(strings.TrimPrefix(string(kv.Key), catalogHeadsDir), kv)
		if err != nil {
			return nil, "", err
		}
		out = append(out, h)
	}
	next := ""
	if more && len(out) > 0 {
		next = out[len(out)-1].Catalog
	}
	return out, next, nil
}

// PurgeCatalog deletes a catalog with its whole history, if it is at
// version expect (AnyVersion: whatever its version); otherwise it fails
// with a *CatalogConflictError. Purging an absent catalog is ErrNotFound.
func (e *Etcd) PurgeCatalog(ctx context.Context, name string, expect int64) error {
	if err := checkCatalogName(name); err != nil {
		return err
	}
	_, err := e.cas(ctx, "purge catalog "+name, catalogHeadKey(name), func(kv *mvccpb.KeyValue, p *plan) error {
		if kv == nil {
			return ErrNotFound
		}
		cur, err := decodeCatalogHead(name, kv)
		if err != nil {
			return err
		}
		if expect != AnyVersion && expect != cur.Version {
			return &CatalogConflictError{Catalog: name, Expected: expect, Current: cur.Version, Deleted: cur.Deleted}
		}
		p.del(catalogHeadKey(name))
		p.del(catalogVersionsPrefix(name), clientv3.WithPrefix())
		p.del(catalogDocumentsPrefix(name), clientv3.WithPrefix())
		return nil
	})
	return err
}

// CatalogEvent is a catalog's head as of a change; Head is nil while the
// catalog does not exist.
type CatalogEvent struct {
	Head *CatalogHead
}

// WatchCatalog reports a catalog's head — first as it is now, then after
// every change made through any Etcd (any replica), including its purge
// (Head nil) and a later re-creation — until ctx or the Etcd closes.
// Events are coalesced: a slow reader skips intermediate heads and always
// gets the latest. The watch resumes after compaction, lost leaders and
// etcd restarts by re-reading the head.
func (e *Etcd) WatchCatalog(ctx context.Context, name string) (<-chan CatalogEvent, error) {
	if err := checkCatalogName(name); err != nil {
		return nil, err
	}
	op, key := "watch catalog "+name, catalogHeadKey(name)
	kv, rev, err := e.getRev(ctx, op, key)
	if err != nil {
		return nil, err
	}
	conv := func(kv *mvccpb.KeyValue) CatalogEvent {
		if kv == nil {
			return CatalogEvent{}
		}
		h, err := decodeCatalogHead(name, kv)
		if err != nil {
			e.log.Warn("catalog head unreadable; ignored until it changes", zap.String("catalog", name), zap.Error(err))
			return CatalogEvent{}
		}
		return CatalogEvent{Head: h}
	}
	out := make(chan CatalogEvent, 1)
	out <- conv(kv)
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(e.bgCtx, cancel)
	go func() {
		defer close(out)
		defer stop()
		defer cancel()
		e.resumeWatch(ctx, key, rev, nil, func(ev *clientv3.Event) bool {
			if ev.Type == mvccpb.DELETE {
				sendLatest(out, CatalogEvent{})
			} else {
				sendLatest(out, conv(ev.Kv))
			}
			return true
		}, func() (int64, bool, error) {
			kv, r, err := e.getRev(ctx, op, key)
			if err == nil {
				sendLatest(out, conv(kv))
			}
			return r, true, err
		})
	}()
	return out, nil
}
