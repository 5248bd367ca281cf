package command

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// An error is printed with one "strata:" before it: a checkpoint whose
// flush never lands fails naming the table, not "strata: strata: …".
func TestErrorsArePrintedWithOnePrefix(t *testing.T) {
	// A server whose shard keeps, poll after poll, rows the flush should
	// have sealed.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"version":1,"merging":false,"shards":[{"shard":"srv-a","own":true,"epoch":1,"wal_last_written":5,` +
			`"wal_flushed":5,"wal_lag":0,"memtable_rows":3,"memtable_from":4,"watermark":0,"pending_generations":0,"pending_bytes":0,"newest_generation":0}]}`))
	}))
	defer srv.Close()
	code, _, errOut := run(t, nil, "checkpoint", "t", "--server", srv.URL)
	if code != 1 || !strings.HasPrefix(errOut, "strata: ") || strings.Count(errOut, "strata:") != 1 || !strings.Contains(errOut, "checkpoint of t") {
		t.Fatalf("exit %d, stderr %q: want one error line with one strata: prefix", code, errOut)
	}
}
