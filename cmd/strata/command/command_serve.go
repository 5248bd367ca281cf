package command

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/stratadb/strata/server"
	"github.com/stratadb/strata/walshard"
)

func newServe(env *Env) *cobra.Command {
	var bucket, listen, token, instance string
	var insecure bool
	var flushEvery, mergeEvery time.Duration
	c := &cobra.Command{
		Use:   "serve",
		Short: "Serve the tables under a bucket over HTTP",
		Long: `serve offers the tables under --bucket over HTTP (/api/v1/tables/NAME/…):
create, describe, drop, append (through this server's own WAL shard), scan,
take, versions, tags, compaction, and LSM flush, merge and stats; /healthz
and /metrics (Prometheus text).

The server's shard is "srv-" and its instance id (--instance, STRATA_INSTANCE,
default the hostname): give each replica its own. With a token (--token or
STRATA_TOKEN) requests need "Authorization: Bearer TOKEN"; without one the
server listens on loopback only, unless --insecure-listen. On SIGTERM it stops
accepting, flushes and merges its shards, then exits.`,
		Example: `  strata serve --bucket file://./strata-demo --listen 127.0.0.1:8080
  STRATA_TOKEN=secret strata serve --bucket 's3://lake?endpoint=http://minio:9000' --listen :8080`,
		Args: exactArgs(0),
		RunE: func(c *cobra.Command, args []string) error {
			if token == "" {
				token = os.Getenv("STRATA_TOKEN")
			}
			if instance == "" {
				instance = os.Getenv("STRATA_INSTANCE")
			}
			if instance == "" {
				instance, _ = os.Hostname()
			}
			if bucket == "" {
				return usageError{errors.New("serve needs --bucket URL")}
			}
			host, _, err := net.SplitHostPort(listen)
			if err != nil {
				return usageError{fmt.Errorf("--listen %q: %v", listen, err)}
			}
			if ip := net.ParseIP(host); token == "" && !insecure && (ip == nil || !ip.IsLoopback()) && host != "localhost" {
				return usageError{fmt.Errorf("no token configured: listen on a loopback address, set --token/STRATA_TOKEN, or pass --insecure-listen")}
			}
			log := slog.New(slog.NewJSONHandler(env.Err, nil))
			srv, err := server.New(server.Options{Bucket: bucket, Instance: instance, Token: token, Log: log, Open: env.Open,
				Shard: walshard.Options{FlushInterval: flushEvery, MergeInterval: mergeEvery}})
			if err != nil {
				return err
			}
			ln, err := net.Listen("tcp", listen)
			if err != nil {
				return err
			}
			hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second}
			log.Info("serving", "listen", ln.Addr().String(), "bucket", bucket, "shard", srv.ShardID(), "auth", token != "")
			fmt.Fprintf(env.Out, "strata serve: listening on http://%s, shard %s\n", ln.Addr(), srv.ShardID())
			errc := make(chan error, 1)
			go func() { errc <- hs.Serve(ln) }()
			select {
			case err := <-errc:
				return err
			case <-c.Context().Done():
			}
			log.Info("draining")
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			_ = hs.Shutdown(ctx)
			if err := srv.Shutdown(ctx); err != nil {
				return err
			}
			log.Info("stopped")
			return nil
		},
	}
	f := c.Flags()
	f.StringVar(&bucket, "bucket", "", "bucket URL under which tables live")
	f.StringVar(&listen, "listen", "127.0.0.1:8080", "address to listen on")
	f.StringVar(&token, "token", "", "bearer token required of clients (or STRATA_TOKEN)")
	f.StringVar(&instance, "instance", "", "instance id, naming this server's shard (or STRATA_INSTANCE; default the hostname)")
	f.BoolVar(&insecure, "insecure-listen", false, "allow a non-loopback address without a token")
	f.DurationVar(&flushEvery, "flush-interval", 5*time.Second, "flush a memtable this old")
	f.DurationVar(&mergeEvery, "merge-interval", 10*time.Second, "merge generations this often")
	return c
}
