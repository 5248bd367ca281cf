package servecmd

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/stratadb/strata/cmd/strata/command"
	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/internal/buildinfo"
	"github.com/stratadb/strata/internal/policyflag"
	"github.com/stratadb/strata/server"
)

// serveFlags are serve's flags.
type serveFlags struct {
	bucket, listen, token, tokens, instance, logLevel, rootNamespace string
	tlsCert, tlsKey, clientCA                                        string
	insecure, openMetrics                                            bool
	flushEvery, mergeEvery, shutdownGrace, drainTimeout              time.Duration
	reuseBytes, maxBody, budget, writeShare                          int64
	policy                                                           *policyflag.Flags
}

func newServe(env *command.Env) *cobra.Command {
	var s serveFlags
	c := &cobra.Command{
		Use:   "serve",
		Short: "Serve the tables under a bucket over HTTP",
		Long: `serve offers the tables under --bucket over HTTP (/api/v1/tables/NAME/…):
create, describe, drop, append (through this server's own WAL shard), scan,
take, versions, tags, compaction, and LSM flush, merge and stats; /healthz
and /metrics (Prometheus text).

The server's shard is "srv-" and its instance id (--instance, STRATA_INSTANCE,
default the hostname): give each replica its own. With a token (--token or
STRATA_TOKEN) requests need "Authorization: Bearer TOKEN"; with a tokens
file (--tokens FILE, its lines made by strata token new) each token may do
what its grants say (read, append, write, admin on table-name patterns), and
a request outside them is refused 403; the file is read again when it
changes or on SIGHUP. With --tls-cert and --tls-key it serves HTTPS (the
files read again when they change, as cert-manager renews them); with
--client-ca every client must show a certificate that CA signed (mutual
TLS). Beyond loopback the server needs TLS and a way to tell its clients
(a token, a tokens file or --client-ca), unless --insecure-listen. On SIGTERM it stops
accepting, gives requests in flight --shutdown-grace to finish (then closes
their connections: a slow client cannot hold the exit), flushes and merges
its shards, then exits.

Limits: a body over --max-body is refused (413); a body must keep arriving
(after 10 s, at least 64 KiB/s, or 408); appends, scans and takes share
--memory-budget (beyond it, 429 with Retry-After), of which --write-share
is for appends alone, so that readers cannot starve writers; idle
connections close after 2 minutes. The process stays within the budget and
a fixed overhead of 192 MiB: Go's soft memory limit is set to the budget
and 96 MiB, unless GOMEMLIMIT is set.`,
		Example: `  strata serve --bucket file://./strata-demo --listen 127.0.0.1:8080
  STRATA_TOKEN=secret strata serve --bucket 's3://lake?endpoint=http://minio:9000' --listen :8080`,
		Args: command.ExactArgs(0),
		RunE: func(c *cobra.Command, args []string) error { return runServe(c.Context(), env, &s) },
	}
	f := c.Flags()
	f.StringVar(&s.bucket, "bucket", "", "bucket URL under which tables live")
	f.StringVar(&s.listen, "listen", "127.0.0.1:8080", "address to listen on")
	f.StringVar(&s.token, "token", "", "bearer token required of clients, with every grant (or STRATA_TOKEN)")
	f.StringVar(&s.tokens, "tokens", "", "file of tokens' SHA-256 and their grants (see strata token new); read again on change or SIGHUP")
	f.StringVar(&s.instance, "instance", "", "instance id, naming this server's shard (or STRATA_INSTANCE; default the hostname)")
	f.StringVar(&s.logLevel, "log-level", "info", "debug, info (one access-log line per request), warn or error")
	f.StringVar(&s.tlsCert, "tls-cert", "", "serve HTTPS with this certificate chain (PEM; read again on change)")
	f.StringVar(&s.tlsKey, "tls-key", "", "the certificate's private key (PEM)")
	f.StringVar(&s.clientCA, "client-ca", "", "require client certificates signed by this CA (PEM): mutual TLS")
	f.BoolVar(&s.insecure, "insecure-listen", false, "allow a non-loopback address without TLS or without a token")
	f.BoolVar(&s.openMetrics, "open-metrics", false, "answer /metrics without the token (for a Prometheus scraping by pod annotation)")
	f.DurationVar(&s.flushEvery, "flush-interval", 5*time.Second, "flush a memtable this old")
	f.DurationVar(&s.mergeEvery, "merge-interval", 10*time.Second, "merge generations this often")
	f.Int64Var(&s.reuseBytes, "reuse-bytes", engine.DefaultReuseBytes, command.ReuseBytesHelp)
	f.DurationVar(&s.shutdownGrace, "shutdown-grace", 10*time.Second, "on SIGTERM, how long requests in flight may take before their connections close")
	f.DurationVar(&s.drainTimeout, "drain-timeout", 2*time.Minute, "on SIGTERM, how long flushing and merging the shards may take")
	f.StringVar(&s.rootNamespace, "iceberg-root-namespace", "default", "the Iceberg catalog's namespace of the tables at the bucket's root (under /iceberg)")
	f.Int64Var(&s.maxBody, "max-body", 64<<20, "largest request body in bytes")
	f.Int64Var(&s.budget, "memory-budget", 1<<30, "bytes that appends, scans and takes may hold at once")
	f.Int64Var(&s.writeShare, "write-share", 0, "bytes of the memory budget for appends alone, that reads never take (0: a quarter of it; at most half)")
	// The compaction policy, as strata-compactor reads it (the same
	// flags and STRATA_* variables): when compaction is due, for
	// POST …/compact and the due of …/compact/stats.
	s.policy = policyflag.Define(f, true)
	command.AtLeast(c, 1, "max-body", "memory-budget")
	command.AtLeast(c, 0, "flush-interval", "merge-interval", "reuse-bytes", "shutdown-grace", "write-share")
	command.AtLeast(c, int64(time.Millisecond), "drain-timeout")
	return c
}

// logger checks the flags that serve's own checks cover (bucket, listen
// address and token, log level) and returns the server's logger.
func (s *serveFlags) logger(env *command.Env) (*slog.Logger, error) {
	if s.instance == "" {
		s.instance, _ = os.Hostname()
	}
	if s.bucket == "" {
		return nil, command.UsageError(errors.New("serve needs --bucket URL"))
	}
	if err := server.CheckToken(s.token); err != nil {
		return nil, command.UsageError(fmt.Errorf("--token/STRATA_TOKEN: %w", err))
	}
	host, _, err := net.SplitHostPort(s.listen)
	if err != nil {
		return nil, command.UsageError(fmt.Errorf("--listen %q: %v", s.listen, err))
	}
	if (s.tlsCert == "") != (s.tlsKey == "") || s.clientCA != "" && s.tlsCert == "" {
		return nil, command.UsageError(errors.New("TLS needs --tls-cert and --tls-key together (and --client-ca needs them)"))
	}
	if ip := net.ParseIP(host); !s.insecure && (ip == nil || !ip.IsLoopback()) && host != "localhost" {
		switch {
		case s.token == "" && s.tokens == "" && s.clientCA == "":
			return nil, command.UsageError(fmt.Errorf("no token configured: listen on a loopback address, set --token/STRATA_TOKEN, --tokens or --client-ca, or pass --insecure-listen"))
		case s.tlsCert == "":
			return nil, command.UsageError(fmt.Errorf("plain HTTP beyond loopback would send tokens and rows in clear: set --tls-cert and --tls-key, listen on a loopback address, or pass --insecure-listen (behind a proxy that ends TLS)"))
		}
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(s.logLevel)); err != nil {
		return nil, command.UsageError(fmt.Errorf("--log-level %q: want debug, info, warn or error", s.logLevel))
	}
	return slog.New(slog.NewJSONHandler(env.Err, &slog.HandlerOptions{Level: level})), nil
}

// runServe starts the server and serves until ctx ends, then drains.
func runServe(ctx context.Context, env *command.Env, s *serveFlags) error {
	log, err := s.logger(env)
	if err != nil {
		return err
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		// The garbage collector works harder before the heap
		// passes the budget and what the server holds besides,
		// rather than letting it double.
		debug.SetMemoryLimit(server.MemoryLimit(s.budget))
	}
	policy, err := s.policy.Policy()
	if err != nil {
		return command.UsageError(err)
	}
	tokens, err := s.loadTokens(ctx, log)
	if err != nil {
		return err
	}
	srv, err := server.New(&server.Options{Bucket: s.bucket, Instance: s.instance, Token: s.token, Tokens: tokens, OpenMetrics: s.openMetrics, Log: log, Open: env.Open,
		IcebergExport: icebergExporter(log), IcebergRootNamespace: s.rootNamespace,
		MaxBodyBytes: s.maxBody, MemoryBudget: s.budget, WriteShare: s.writeShare, Compaction: policy,
		Shard: engine.ShardOptions{FlushInterval: s.flushEvery, MergeInterval: s.mergeEvery, ReuseBytes: command.ReuseBytes(s.reuseBytes)}})
	if errors.Is(err, server.ErrInvalidOptions) || errors.Is(err, engine.ErrInvalidCompaction) || errors.Is(err, engine.ErrInvalidShard) {
		return command.UsageError(err)
	}
	if err != nil {
		return err
	}
	// A bucket that cannot be opened fails now, not at the first
	// request.
	if err := srv.CheckBucket(ctx); err != nil {
		return err
	}
	ln, err := s.listener(log)
	if err != nil {
		return err
	}
	hs := srv.HTTPServer()
	log.Info("serving", "listen", ln.Addr().String(), "bucket", s.bucket, "shard", srv.ShardID(), "auth", s.token != "" || tokens != nil, "tls", s.tlsCert != "", "client_ca", s.clientCA != "",
		"version", buildinfo.Get().Version, "revision", buildinfo.Get().Revision)
	scheme := "http"
	if s.tlsCert != "" {
		scheme = "https"
	}
	fmt.Fprintf(env.Out, "strata serve: listening on %s://%s, shard %s\n", scheme, ln.Addr(), srv.ShardID())
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	log.Info("draining")
	// Requests in flight get the grace; then their connections
	// close, so that no client holds the drain of the shards.
	graceCtx, cancelGrace := context.WithTimeout(context.Background(), s.shutdownGrace)
	if err := hs.Shutdown(graceCtx); err != nil {
		log.Warn("closing requests still in flight", "after", s.shutdownGrace.String())
		_ = hs.Close()
	}
	cancelGrace()
	drainCtx, cancel := context.WithTimeout(context.Background(), s.drainTimeout)
	defer cancel()
	if err := srv.Shutdown(drainCtx); err != nil {
		return err
	}
	log.Info("stopped")
	return nil
}

// loadTokens reads --tokens, and reads it again when it changes (looking
// every second) or on SIGHUP, until ctx ends; a file that cannot be read
// again leaves the tokens read before in use, and says so in the log.
func (s *serveFlags) loadTokens(ctx context.Context, log *slog.Logger) (*server.Tokens, error) {
	var tokens *server.Tokens
	report := func(err error) {
		if err != nil {
			log.Error("tokens file not reloaded: the tokens read before stay in use", "file", s.tokens, "error", err.Error())
			return
		}
		log.Info("tokens file reloaded", "file", s.tokens, "tokens", tokens.Len())
	}
	if s.tokens != "" {
		var err error
		if tokens, err = server.LoadTokens(s.tokens); err != nil {
			return nil, command.UsageError(fmt.Errorf("--tokens: %w", err))
		}
		go tokens.Watch(ctx, time.Second, report)
	}
	// SIGHUP, an operator's "read your files again", never stops the
	// server: it reloads the tokens file, and the TLS files are read
	// again when they change anyway.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	go func() {
		defer signal.Stop(hup)
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				if tokens == nil {
					log.Info("SIGHUP: no tokens file to read again (TLS files are read again when they change)")
					continue
				}
				report(tokens.Reload())
			}
		}
	}()
	return tokens, nil
}

// listener listens on --listen, with TLS when asked, each connection
// followed by the server's framing guard.
func (s *serveFlags) listener(log *slog.Logger) (net.Listener, error) {
	var conf *tls.Config
	if s.tlsCert != "" {
		var err error
		conf, err = server.TLSConfig(server.TLSFiles{Cert: s.tlsCert, Key: s.tlsKey, ClientCA: s.clientCA}, func(err error) {
			if err != nil {
				log.Error("TLS files not reloaded: the certificate before stays in use", "error", err.Error())
				return
			}
			log.Info("TLS files reloaded", "cert", s.tlsCert)
		})
		if err != nil {
			return nil, command.UsageError(err)
		}
	}
	ln, err := net.Listen("tcp", s.listen)
	if err != nil {
		return nil, err
	}
	if conf != nil {
		return server.TLSListener(ln, conf, log), nil
	}
	return server.Listener(ln), nil
}
