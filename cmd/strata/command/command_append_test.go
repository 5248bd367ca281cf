package command

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stratadb/strata/blob"
	"github.com/stratadb/strata/blob/fault"
)

// strata append run again appends its rows once: after it succeeded (it
// says "already appended"), and after the store acted and the command
// died before it heard (it exits 3 and says to run it again) — directly
// and through a shard. --no-idempotency-key appends again on purpose; a
// key given for other files is refused.
func TestAnAppendRunAgainAppendsItsRowsOnce(t *testing.T) {
	dir := t.TempDir()
	schema := dir + "/s.json"
	os.WriteFile(schema, []byte(`{"fields":[{"name":"id","type":"int64"}]}`), 0o644)
	os.WriteFile(dir+"/a.jsonl", []byte("{\"id\":1}\n{\"id\":2}\n"), 0o644)
	os.WriteFile(dir+"/b.jsonl", []byte("{\"id\":3}\n"), 0o644)
	u := "file://" + dir + "/t"
	if code, _, errOut := run(t, nil, "create", u, "--schema", schema); code != 0 {
		t.Fatal(errOut)
	}
	rows := func() int {
		code, out, errOut := run(t, nil, "scan", u, "--format", "csv")
		if code != 0 {
			t.Fatal(errOut)
		}
		n := 0
		for line := range strings.Lines(out) {
			if line != "id\n" {
				n++
			}
		}
		return n
	}
	for _, via := range [][]string{nil, {"--shard", "loader"}} {
		args := append([]string{"append", u, dir + "/a.jsonl"}, via...)
		if via != nil {
			// The same files through a shard after a direct append: the
			// table records the key whichever way the rows came.
			if code, out, errOut := run(t, nil, args...); code != 0 || !strings.Contains(out, "already appended: version") {
				t.Fatalf("append %v after a direct append: %d %s %s", via, code, out, errOut)
			}
			os.WriteFile(dir+"/a.jsonl", []byte("{\"id\":4}\n{\"id\":5}\n"), 0o644)
		}
		before := rows()
		if code, out, errOut := run(t, nil, args...); code != 0 || !strings.Contains(out, "appended 2 rows") {
			t.Fatalf("append %v: %d %s %s", via, code, out, errOut)
		}
		if code, out, errOut := run(t, nil, args...); code != 0 || !strings.Contains(out, "already appended") || !strings.Contains(out, "nothing appended") {
			t.Fatalf("append %v run again: %d %s %s", via, code, out, errOut)
		}
		if n := rows(); n != before+2 {
			t.Fatalf("append %v run twice: %d rows added, want 2", via, n-before)
		}
		if code, out, _ := run(t, nil, append(args, "--no-idempotency-key")...); code != 0 || !strings.Contains(out, "appended 2 rows") || rows() != before+4 {
			t.Fatalf("append %v --no-idempotency-key: %d %s", via, code, out)
		}
	}
	keyed := []string{"append", u, dir + "/b.jsonl", "--idempotency-key", "day-1"}
	if code, _, errOut := run(t, nil, keyed...); code != 0 {
		t.Fatal(errOut)
	}
	if code, _, errOut := run(t, nil, "append", u, dir+"/a.jsonl", "--idempotency-key", "day-1"); code != 4 || !strings.Contains(errOut, "reused") {
		t.Fatalf("a key given for other files: %d %s", code, errOut)
	}
	if code, _, errOut := run(t, nil, "append", u, dir+"/a.jsonl", "--idempotency-key", "x", "--no-idempotency-key"); code != 2 {
		t.Fatalf("both key flags: %d %s", code, errOut)
	}
}

// The store creates the commit (the manifest, or the shard's WAL entry),
// then stops answering for good, as if the command were killed then: it
// exits 3. Run again on a working store, it appends nothing more.
func TestAnAppendWhoseStoreDiedAfterActingIsRunAgainSafely(t *testing.T) {
	for _, c := range []struct {
		via    []string
		commit *regexp.Regexp
		nth    int // the create that commits (a shard's first is its fence)
	}{
		{nil, regexp.MustCompile(`^_versions/`), 1},
		{[]string{"--shard", "loader"}, regexp.MustCompile(`^_shards/loader/wal/`), 2},
	} {
		dir := t.TempDir()
		os.WriteFile(dir+"/s.json", []byte(`{"fields":[{"name":"id","type":"int64"}]}`), 0o644)
		os.WriteFile(dir+"/a.jsonl", []byte("{\"id\":1}\n{\"id\":2}\n"), 0o644)
		root := "file://" + dir
		if code, _, errOut := run(t, nil, "create", root+"/t", "--schema", dir+"/s.json"); code != 0 {
			t.Fatal(errOut)
		}
		dying := &Env{Open: func(ctx context.Context, u string) (blob.Bucket, error) {
			b, err := blob.Open(ctx, u)
			if err != nil {
				return nil, err
			}
			creates, dead := 0, false
			return fault.Wrap(b, fault.InjectorFunc(func(op fault.Op, key string) fault.Fault {
				if dead {
					return fault.Fault{Action: fault.Crash}
				}
				if op == fault.OpPutIfAbsent && c.commit.MatchString(key) {
					creates++
					if creates == c.nth {
						dead = true
						return fault.Fault{Action: fault.LoseResponse}
					}
				}
				return fault.Fault{}
			})), nil
		}}
		args := append([]string{"append", root + "/t", dir + "/a.jsonl"}, c.via...)
		code, _, errOut := run(t, dying, args...)
		if code != 3 || !strings.Contains(errOut, "run the same command again") {
			t.Fatalf("%v: the store died after acting: exit %d, %s", c.via, code, errOut)
		}
		if code, out, errOut := run(t, nil, args...); code != 0 || !strings.Contains(out, "already appended") {
			t.Fatalf("%v: run again: %d %s %s", c.via, code, out, errOut)
		}
		if code, out, _ := run(t, nil, "scan", root+"/t", "--format", "csv", "--fresh"); code != 0 || strings.Count(out, "\n") != 3 {
			t.Fatalf("%v: the table holds\n%s\nwant ids 1 and 2 once", c.via, out)
		}
	}
}

// Appending a file again is a retry only when it is the same file — its
// path, size, modification time and bytes: a copy elsewhere, or the same
// file written again, appends. A skipped append says why, how long names
// are kept and how to append anyway (--again). Standard input (-, with
// --format) has no default name: every run appends, unless named.
func TestAnAppendIsARetryOnlyOfTheSameFile(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(dir+"/s.json", []byte(`{"fields":[{"name":"id","type":"int64"}]}`), 0o644)
	u := "file://" + dir + "/t"
	if code, _, errOut := run(t, nil, "create", u, "--schema", dir+"/s.json"); code != 0 {
		t.Fatal(errOut)
	}
	count := func() string {
		_, out, _ := run(t, nil, "count", u)
		return strings.TrimSpace(out)
	}
	day := []byte("{\"id\":1}\n{\"id\":2}\n")
	os.WriteFile(dir+"/day.jsonl", day, 0o644)
	if code, out, errOut := run(t, nil, "append", u, dir+"/day.jsonl"); code != 0 || !strings.Contains(out, "appended 2 rows") {
		t.Fatalf("append: %d %s %s", code, out, errOut)
	}
	code, out, _ := run(t, nil, "append", u, dir+"/day.jsonl")
	if code != 0 || !strings.Contains(out, "already appended") || !strings.Contains(out, "path, size, modification time and bytes") ||
		!strings.Contains(out, "kept for an hour") || !strings.Contains(out, "--again") || count() != "2" {
		t.Fatalf("the same file again: %d %q, %s rows", code, out, count())
	}
	if code, out, _ := run(t, nil, "append", u, dir+"/day.jsonl", "--again"); code != 0 || !strings.Contains(out, "appended 2 rows") || count() != "4" {
		t.Fatalf("--again: %d %q", code, out)
	}
	os.WriteFile(dir+"/copy.jsonl", day, 0o644)
	if code, out, _ := run(t, nil, "append", u, dir+"/copy.jsonl"); code != 0 || !strings.Contains(out, "appended 2 rows") || count() != "6" {
		t.Fatalf("another file with the same bytes: %d %q", code, out)
	}
	later := time.Now().Add(time.Minute)
	os.Chtimes(dir+"/day.jsonl", later, later) // the daily export, written again unchanged
	if code, out, _ := run(t, nil, "append", u, dir+"/day.jsonl"); code != 0 || !strings.Contains(out, "appended 2 rows") || count() != "8" {
		t.Fatalf("the same file written again: %d %q", code, out)
	}

	stdin := func(body string, args ...string) (int, string, string) {
		return run(t, &Env{Open: blob.Open, In: strings.NewReader(body)}, append([]string{"append", u, "-"}, args...)...)
	}
	for range 2 {
		if code, out, errOut := stdin("id\n7\n", "--format", "csv"); code != 0 || !strings.Contains(out, "appended 1 rows") {
			t.Fatalf("append - --format csv: %d %s %s", code, out, errOut)
		}
	}
	if count() != "10" {
		t.Fatalf("standard input twice: %s rows, want 10", count())
	}
	for range 2 {
		if code, _, errOut := stdin(`{"id": 8}`+"\n", "--format", "jsonl", "--idempotency-key", "batch-8"); code != 0 {
			t.Fatalf("append - named: %d %s", code, errOut)
		}
	}
	if count() != "11" {
		t.Fatalf("standard input named, twice: %s rows, want 11", count())
	}
	if code, _, errOut := stdin("id\nx\n", "--format", "csv"); code != 4 || !strings.Contains(errOut, "standard input: table: CSV line 2") {
		t.Fatalf("bad rows on standard input: %d %s", code, errOut)
	}
	if code, _, errOut := stdin("id\n1\n"); code != 2 || !strings.Contains(errOut, "--format") {
		t.Fatalf("- without --format: %d %s", code, errOut)
	}
	if code, _, errOut := stdin("id\n1\n", "--format", "xml"); code != 2 || !strings.Contains(errOut, "want csv, jsonl or parquet") {
		t.Fatalf("--format xml: %d %s", code, errOut)
	}
	if code, _, errOut := run(t, nil, "append", u, dir+"/nosuch.csv"); code != 2 || !strings.Contains(errOut, "nosuch.csv: no such file") {
		t.Fatalf("a file that is not there: %d %s", code, errOut)
	}
	if code, _, errOut := run(t, nil, "append", u, dir+"/copy.jsonl", dir+"/copy.jsonl", "--again"); code != 2 || !strings.Contains(errOut, "given twice") || count() != "11" {
		t.Fatalf("a file given twice: %d %s", code, errOut)
	}
	if code, _, errOut := run(t, nil, "count", u, "--as-of", ""); code != 2 || !strings.Contains(errOut, "--as-of needs a time") {
		t.Fatalf("--as-of '': %d %s", code, errOut)
	}
}

// strata upsert's --when-… flags: an insert of new keys only, an update of
// present keys where a condition over the pair holds, a sync that deletes
// the rows the file lacks; flags that contradict each other are usage
// errors.
func TestAnUpsertWithClausesFromTheCommandLine(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(dir+"/s.json", []byte(`{"fields":[{"name":"id","type":"int64"},{"name":"step","type":"int64"}]}`), 0o644)
	u := "file://" + dir + "/t"
	if code, _, errOut := run(t, nil, "create", u, "--schema", dir+"/s.json"); code != 0 {
		t.Fatal(errOut)
	}
	os.WriteFile(dir+"/a.csv", []byte("id,step\n1,1\n2,5\n"), 0o644)
	if code, _, errOut := run(t, nil, "append", u, dir+"/a.csv"); code != 0 {
		t.Fatal(errOut)
	}
	os.WriteFile(dir+"/b.csv", []byte("id,step\n1,3\n2,3\n3,3\n"), 0o644)
	os.WriteFile(dir+"/c.csv", []byte("id,step\n1,3\n3,3\n"), 0o644)
	for _, c := range []struct {
		file string
		args []string
		says string
		rows string
	}{
		{"b.csv", []string{"--when-matched", "ignore"}, "1 rows inserted, 0 updated", "id,step\n1,1\n2,5\n3,3\n"},
		{"b.csv", []string{"--when-matched-if", "target.step < source.step", "--when-not-matched", "ignore"}, "0 rows inserted, 1 updated (replacing 1)", "id,step\n2,5\n3,3\n1,3\n"},
		{"c.csv", []string{"--when-not-matched-by-source", "delete", "--when-not-matched-by-source-if", "step > 4"}, "0 rows inserted, 2 updated (replacing 2), 1 deleted", "id,step\n1,3\n3,3\n"},
		{"b.csv", []string{"--when-matched-if", ""}, "1 rows inserted, 2 updated (replacing 2), 0 deleted", "id,step\n1,3\n2,3\n3,3\n"},
	} {
		code, out, errOut := run(t, nil, append([]string{"upsert", u, dir + "/" + c.file, "--key", "id"}, c.args...)...)
		if code != 0 || !strings.Contains(out, c.says) {
			t.Fatalf("upsert %v: %d %q %s", c.args, code, out, errOut)
		}
		if _, got, _ := run(t, nil, "scan", u, "--format", "csv"); got != c.rows {
			t.Fatalf("after upsert %v: %q, want %q", c.args, got, c.rows)
		}
	}
	for _, bad := range [][]string{
		{"--when-matched", "maybe"},
		{"--when-matched", "ignore", "--when-matched-if", "step > 1"},
		{"--when-not-matched-by-source-if", "step > 1"},
		{"--when-not-matched-by-source", "delete", "--shard", "s1"},
		{"--when-matched", "ignore", "--when-not-matched", "ignore"},
		{"--when-matched-if", "target.nope < 1"},
	} {
		if code, _, errOut := run(t, nil, append([]string{"upsert", u, dir + "/b.csv", "--key", "id"}, bad...)...); code != 2 {
			t.Errorf("upsert %v: exit %d, want 2: %s", bad, code, errOut)
		}
	}
}

// Times name versions wherever versions are taken: strata changes
// --from-as-of and --to-as-of bound the changes by time (a time before the
// table's creation: every change since), and strata take reads --version,
// --tag or --as-of as scan does.
func TestChangesAndTakeAsOfATime(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(dir+"/s.json", []byte(`{"fields":[{"name":"id","type":"int64"}]}`), 0o644)
	u := "file://" + dir + "/t"
	before := time.Now()
	time.Sleep(3 * time.Millisecond)
	if code, _, errOut := run(t, nil, "create", u, "--schema", dir+"/s.json"); code != 0 { // v1
		t.Fatal(errOut)
	}
	var after []time.Time // just after v2, v3
	for i, ids := range []string{"1\n2\n", "3\n"} {
		time.Sleep(3 * time.Millisecond)
		file := fmt.Sprintf("%s/%d.csv", dir, i)
		os.WriteFile(file, []byte("id\n"+ids), 0o644)
		if code, _, errOut := run(t, nil, "append", u, file); code != 0 {
			t.Fatal(errOut)
		}
		time.Sleep(3 * time.Millisecond)
		after = append(after, time.Now())
	}
	at := func(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }
	lines := func(out string) int { return strings.Count(out, "\n") }
	if code, out, errOut := run(t, nil, "changes", u, "--from-as-of", at(after[0]), "--format", "csv", "--columns", "id"); code != 0 || lines(out) != 2 || !strings.Contains(out, "3,insert,3") {
		t.Fatalf("changes --from-as-of just after v2: %d %q %s; want v3's insert of 3", code, out, errOut)
	}
	if code, out, errOut := run(t, nil, "changes", u, "--from-as-of", at(before), "--to-as-of", at(after[0]), "--format", "csv", "--columns", "id"); code != 0 || lines(out) != 3 || strings.Contains(out, "3,insert") {
		t.Fatalf("changes from before the table to just after v2: %d %q %s; want the inserts of 1 and 2", code, out, errOut)
	}
	if code, _, errOut := run(t, nil, "changes", u, "--from", "0", "--from-as-of", "2h"); code != 2 || !strings.Contains(errOut, "one of --from") {
		t.Fatalf("--from with --from-as-of: %d %s", code, errOut)
	}
	if code, _, errOut := run(t, nil, "changes", u, "--from-as-of", "noon"); code != 2 || !strings.Contains(errOut, "--from-as-of") {
		t.Fatalf("--from-as-of noon: %d %s", code, errOut)
	}
	for _, c := range []struct {
		args []string
		want bool // key 3 found
	}{{[]string{"--as-of", at(after[0])}, false}, {[]string{"--as-of", at(after[1])}, true}, {[]string{"--version", "2"}, false}, {nil, true}} {
		code, out, errOut := run(t, nil, append([]string{"take", u, "3", "--format", "csv"}, c.args...)...)
		if code != 0 || strings.Contains(out, "\n3") != c.want {
			t.Fatalf("take 3 %v: %d %q %s; want found %v", c.args, code, out, errOut, c.want)
		}
	}
	if code, _, errOut := run(t, nil, "take", u, "3", "--as-of", at(before)); code != 5 || !strings.Contains(errOut, "the oldest retained, v1") {
		t.Fatalf("take as of a time before the table: %d %s", code, errOut)
	}
}
