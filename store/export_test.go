package store

import clientv3 "go.etcd.io/etcd/client/v3"

// EtcdClient exposes the client of an Etcd to the external tests.
func EtcdClient(e *Etcd) *clientv3.Client { return e.cli }
