package caddymodule

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	caddycmd "github.com/caddyserver/caddy/v2/cmd"

	"github.com/crankmcp/crank/store"
)

// SnapshotCommand is the subcommand that backs up a fleet's etcd state and
// restores it into a new cluster (docs/operations.md, "Backup and
// restore").
const SnapshotCommand = "snapshot"

func init() {
	caddycmd.RegisterCommand(caddycmd.Command{
		Name:  SnapshotCommand,
		Usage: "save|restore <file> [--endpoints <urls>] [--embedded <data_dir>] [--cacert <f> --cert <f> --key <f>] [--prefix <p>]",
		Short: "Saves an etcd snapshot of Crank's state, or restores one into a new cluster",
		Long: `Backs up and restores the state Crank keeps in etcd (docs/operations.md,
"Backup and restore"):

  save <file>     etcd's own snapshot of the whole keyspace, taken live from
                  one member (the file etcdctl snapshot save writes, which
                  etcdutl snapshot restore reads too)
  restore <file>  the keys under the prefix, from such a file, put into an
                  etcd that holds none yet (a new cluster): leases are
                  granted again for their whole TTL, revisions start afresh

--endpoints names the cluster (comma-separated URLs); --embedded <data_dir>
reaches the embedded etcd of a gateway (its client URL and the client
certificate in <data_dir>/crank-tls), running. --cacert, --cert and --key
secure https:// endpoints.`,
		Func:  runSnapshot,
		Flags: snapshotFlags(),
	})
}

func snapshotFlags() *flag.FlagSet {
	flags := flag.NewFlagSet(SnapshotCommand, flag.ContinueOnError)
	flags.String("endpoints", "", "the etcd cluster's client URLs, comma-separated")
	flags.String("embedded", "", "the data_dir of a running gateway's embedded etcd")
	flags.String("client-url", "https://127.0.0.1:2379", "with --embedded: its client_url")
	flags.String("cacert", "", "the CA bundle of https:// endpoints")
	flags.String("cert", "", "a client certificate")
	flags.String("key", "", "the client certificate's key")
	flags.String("prefix", store.DefaultPrefix, "Crank's key prefix")
	flags.Duration("timeout", 5*time.Minute, "how long the whole save or restore may take")
	return flags
}

func runSnapshot(fl caddycmd.Flags) (int, error) {
	msg, err := snapshotMain(fl)
	if err != nil {
		return caddy.ExitCodeFailedStartup, err
	}
	fmt.Println(msg)
	return caddy.ExitCodeSuccess, nil
}

func snapshotMain(fl caddycmd.Flags) (string, error) {
	args := fl.Args()
	if len(args) != 2 || args[0] != "save" && args[0] != "restore" {
		return "", errors.New("usage: crank snapshot save|restore <file> (crank help snapshot)")
	}
	verb, file := args[0], args[1]
	cfg := store.EtcdConfig{Prefix: fl.String("prefix"), DialTimeout: 10 * time.Second}
	switch dir := fl.String("embedded"); {
	case dir != "" && fl.String("endpoints") != "":
		return "", errors.New("--embedded and --endpoints: give one")
	case dir != "":
		u := strings.Replace(fl.String("client-url"), "http://", "https://", 1) // the embedded etcd serves TLS alone
		cfg.Endpoints, cfg.TLS = []string{u}, store.EmbeddedClientTLS(filepath.Clean(dir))
	case fl.String("endpoints") != "":
		cfg.Endpoints = strings.Split(fl.String("endpoints"), ",")
		if ca, cert, key := fl.String("cacert"), fl.String("cert"), fl.String("key"); ca+cert+key != "" {
			cfg.TLS = &store.TLSConfig{CAFile: ca, CertFile: cert, KeyFile: key}
		}
	default:
		return "", errors.New("--endpoints or --embedded: name the etcd")
	}
	ctx, cancel := context.WithTimeout(context.Background(), fl.Duration("timeout"))
	defer cancel()
	st, err := store.NewEtcd(ctx, cfg)
	if err != nil {
		return "", err
	}
	defer st.Close()
	if verb == "save" {
		f, err := os.OpenFile(file, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
		if err != nil {
			return "", fmt.Errorf("snapshot save: %w", err)
		}
		n, err := st.SaveSnapshot(ctx, f)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			_ = os.Remove(file)
			return "", err
		}
		return fmt.Sprintf("saved a snapshot of %d bytes to %s", n, file), nil
	}
	rep, err := st.RestoreSnapshot(ctx, file)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("restored %d keys under %s on %d leases, as of the snapshot's revision %d", rep.Keys, cfg.Prefix, rep.Leases, rep.Revision), nil
}
