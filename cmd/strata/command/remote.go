package command

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/spf13/pflag"

	"github.com/stratadb/strata/api"
	"github.com/stratadb/strata/client"
	"github.com/stratadb/strata/internal/ingest"
	"github.com/stratadb/strata/table"
)

// remote is how a verb reaches a strata serve instead of a bucket:
// --server URL (or STRATA_SERVER), its token, and for an https:// server
// the CA that signed its certificate and the client's own certificate
// when it asks for one (mutual TLS).
type remote struct {
	server, token, ca, cert, key string
}

// flags declares the flags on fs.
func (r *remote) flags(fs *pflag.FlagSet) {
	fs.StringVar(&r.server, "server", "", "server URL (or STRATA_SERVER): http://HOST:PORT or https://HOST:PORT")
	fs.StringVar(&r.token, "token", "", "bearer token (or STRATA_TOKEN)")
	fs.StringVar(&r.ca, "ca", "", "CA certificate (PEM) that signed an https:// server's (or STRATA_CA; default: the system's roots)")
	fs.StringVar(&r.cert, "client-cert", "", "client certificate (PEM), for a server with mutual TLS (or STRATA_CLIENT_CERT)")
	fs.StringVar(&r.key, "client-key", "", "the client certificate's key (PEM) (or STRATA_CLIENT_KEY)")
}

// remote tells whether a verb on arg asks the server: a server is given
// (--server, or STRATA_SERVER) and arg is a table's name, not a URL — a
// name never holds "://", so that STRATA_SERVER, set for the verbs that
// ask a server, leaves a verb on a bucket's table as it is.
func (r *remote) remote(arg string) bool { return r.server != "" && !strings.Contains(arg, "://") }

// client makes the server's client of a verb on table (a name, "" for
// none).
func (r *remote) client(table string) (*client.Client, error) {
	if strings.Contains(table, "://") {
		return nil, usageError{fmt.Errorf("%q: with --server (or STRATA_SERVER) a verb names a table of the server, not a URL", table)}
	}
	opts := &client.Options{Token: r.token}
	if r.ca != "" || r.cert != "" || r.key != "" {
		conf, err := client.TLSConfig(r.ca, r.cert, r.key)
		if err != nil {
			return nil, usageError{fmt.Errorf("--ca, --client-cert, --client-key: %w", err)}
		}
		opts.TLS = conf
	}
	c, err := client.New(r.server, opts)
	if err != nil {
		return nil, usageError{err}
	}
	return c, nil
}

// scanRemote prints the rows of a server's table.
func scanRemote(ctx context.Context, r *remote, name string, opts table.ScanOptions, filter string, at *readPoint, fresh bool, w *rowWriter) error {
	c, err := r.client(name)
	if err != nil {
		return err
	}
	o, err := at.options()
	if err != nil {
		return err
	}
	so := client.ScanOptions{Columns: opts.Columns, Filter: filter, Version: o.Version, Tag: o.Tag, AsOf: o.AsOf, Fresh: fresh}
	if err := w.writeAll(c.ScanIter(ctx, name, so)); err != nil {
		return err
	}
	return w.close()
}

// appendRemote appends the input's rows to a server's table, in one
// request named by the append's key (none: unnamed), so that running the
// command again stores them once.
func appendRemote(ctx context.Context, env *Env, r *remote, name string, in *input, f appendFlags) error {
	if f.shard != "" {
		return usageError{errors.New("--shard appends through a shard of the bucket: not with --server (the server appends through its own)")}
	}
	c, err := r.client(name)
	if err != nil {
		return err
	}
	size, err := in.size()
	if err != nil {
		return err
	}
	var key string
	if !f.noKey && (f.key != "" || !in.stdin) {
		k, err := appendKey(in.files, f.key, f.ignoreUnknown)
		if err != nil {
			return err
		}
		key = k.Producer
	}
	info, err := c.Describe(ctx, name)
	if err != nil {
		return err
	}
	schema, err := info.Schema.ToArrow()
	if err != nil {
		return err
	}
	opts := ingest.Options{IgnoreUnknown: f.ignoreUnknown, Limit: max(size, 1) + 1}
	bar := newProgress(env.Err, "append", "bytes", size)
	var recs []arrow.RecordBatch
	defer func() {
		for _, rec := range recs {
			rec.Release()
		}
	}()
	for _, path := range in.files {
		for rec, err := range readFile(path, in.formatOf(path), schema, opts, bar.Add) {
			if err != nil {
				return fmt.Errorf("%s: %w (nothing was appended)", in.name(path), err)
			}
			rec.Retain()
			recs = append(recs, rec)
		}
	}
	var res api.AppendResult
	if key != "" {
		res, err = c.AppendOnce(ctx, name, key, recs...)
	} else {
		var n int64
		n, err = c.Append(ctx, name, recs...)
		res.Rows = n
	}
	bar.Done()
	switch {
	case err != nil && key != "" && client.IsCode(err, api.CodeOutcomeUnknown):
		return fmt.Errorf("%w; run the same command again: it appends the rows once (idempotency key %s)", err, key)
	case err != nil:
		return err
	case res.Duplicate:
		fmt.Fprintf(env.Out, "already appended: the server holds these %d rows (%s); nothing appended\n%s", res.Rows, "idempotency key "+key, againHint)
	default:
		fmt.Fprintf(env.Out, "appended %d rows from %d files\n", res.Rows, len(in.files))
	}
	return nil
}
