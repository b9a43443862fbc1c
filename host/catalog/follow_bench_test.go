package catalog_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/crankmcp/crank/host"
	"github.com/crankmcp/crank/host/catalog"
	"github.com/crankmcp/crank/host/opsfile"
	"github.com/crankmcp/crank/store"
	"github.com/crankmcp/crank/store/storetest"
)

// benchDoc is a catalog of n REST operations.
func benchDoc(b *testing.B, n int) *catalog.Document {
	doc := &catalog.Document{}
	for i := range n {
		e, probs := catalog.ParseEntry([]byte(fmt.Sprintf(`{"name": "op_%d", "description": "Operation %d.", "adapter": "rest",
			"input_schema": {"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]},
			"config": {"method": "GET", "url": "http://127.0.0.1:1/items/{id}", "headers": {"X-Key": "{env.KEY}"}}}`, i, i)))
		if probs != nil {
			b.Fatal(probs)
		}
		doc = doc.With(e)
	}
	return doc
}

// BenchmarkCatalogPropagation is how long a catalog version takes to be
// served by a follower on another store client (another replica): the
// write, the watch event, the version's read, its decode and compile
// (100 operations). The baseline is the write alone, in the same run:
// report the ratio; "compile" is the compile alone. The host is built
// without adapters (an empty catalog), so adapter validation is not
// counted.
func BenchmarkCatalogPropagation(b *testing.B) {
	emb, writer := storetest.Embedded(b)
	reader := storetest.Open(b, emb, store.EtcdConfig{})
	doc := benchDoc(b, 100).JSON()
	ctx := context.Background()
	version := int64(0)
	put := func(b *testing.B, name string) {
		h, err := writer.PutCatalog(ctx, store.CatalogWrite{Catalog: name, Expect: store.AnyVersion, Document: doc, Operations: 100})
		if err != nil {
			b.Fatal(err)
		}
		version = h.Version
	}

	b.Run("write", func(b *testing.B) {
		for b.Loop() {
			put(b, "base")
		}
	})
	b.Run("compile", func(b *testing.B) {
		d := benchDoc(b, 100)
		for b.Loop() {
			if _, err := d.Compile("catalog followed", opsfile.LoadOptions{}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("write+serve", func(b *testing.B) {
		served := make(chan int64, 1)
		empty, _ := opsfile.Merge()
		f, err := catalog.Follow(ctx, catalog.FollowOptions{Catalog: "followed", Store: reader,
			Build: func(ctx context.Context, d *catalog.Document, _ int64) (*host.Host, error) {
				if d != nil {
					if _, err := d.Compile("catalog followed", opsfile.LoadOptions{}); err != nil {
						return nil, err
					}
				}
				return host.New(ctx, host.Options{File: empty})
			},
			Serve: func(_ *host.Host, v int64) {
				select {
				case served <- v:
				default:
				}
			}})
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		<-served
		for b.Loop() {
			put(b, "followed")
			for v := <-served; v != version; v = <-served {
			}
		}
	})
}
