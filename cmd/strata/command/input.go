package command

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// input is the files a verb reads rows from, standard input ("-") spooled
// into a file of its own first (so that it is read as a file is: its size
// known, a Parquet file's footer at hand).
type input struct {
	files  []string
	stdin  bool
	spool  string // the file standard input went to, "" for none
	format string // --format: every file's format ("": by its name)
}

// formats are the formats a file's extension says.
var formats = map[string]string{".parquet": "parquet", ".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "jsonl"}

// formatOf is the format of path: csv, jsonl, parquet, or "" when unknown.
func (in *input) formatOf(path string) string {
	if in.format != "" {
		return in.format
	}
	return formats[strings.ToLower(filepath.Ext(path))]
}

// takeInput reads args as FILE... with - for standard input (at most
// once), in format (csv, jsonl or parquet; required for -, and read for
// every file when given).
func takeInput(env *Env, args []string, format string) (*input, error) {
	switch format {
	case "", "csv", "jsonl", "parquet":
	case "ndjson", "json":
		format = "jsonl"
	default:
		return nil, usageError{fmt.Errorf("--format %q: want csv, jsonl or parquet", format)}
	}
	in := &input{format: format}
	seen := map[string]bool{}
	for _, a := range args {
		if a != "-" {
			abs, err := filepath.Abs(a)
			if err == nil && seen[abs] {
				in.remove()
				return nil, usageError{fmt.Errorf("%s is given twice: its rows would be written twice", a)}
			}
			seen[abs] = true
			in.files = append(in.files, a)
			continue
		}
		if in.stdin {
			in.remove()
			return nil, usageError{errors.New("- (standard input) is given twice")}
		}
		if format == "" {
			return nil, usageError{errors.New("- reads standard input: say its format with --format csv, jsonl or parquet")}
		}
		if env.In == nil {
			return nil, usageError{errors.New("- reads standard input, and there is none")}
		}
		f, err := os.CreateTemp("", "strata-stdin-*")
		if err != nil {
			return nil, err
		}
		in.stdin, in.spool = true, f.Name()
		_, err = io.Copy(f, env.In)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			in.remove()
			return nil, fmt.Errorf("reading standard input: %w", err)
		}
		in.files = append(in.files, f.Name())
	}
	return in, nil
}

// size checks the files' formats and returns their bytes.
func (in *input) size() (int64, error) {
	var size int64
	for _, path := range in.files {
		if in.formatOf(path) == "" {
			return 0, usageError{fmt.Errorf("%s: unknown file type (want .parquet, .csv, .jsonl, or --format)", path)}
		}
		fi, err := os.Stat(path)
		if errors.Is(err, os.ErrNotExist) {
			return 0, usageError{fmt.Errorf("%s: no such file", path)}
		}
		if err != nil {
			return 0, err
		}
		if fi.IsDir() {
			return 0, usageError{fmt.Errorf("%s is a folder: give the files in it", path)}
		}
		size += fi.Size()
	}
	return size, nil
}

// name is how messages name path: "standard input" for the spool.
func (in *input) name(path string) string {
	if path == in.spool && in.spool != "" {
		return "standard input"
	}
	return path
}

// remove deletes the spool.
func (in *input) remove() {
	if in.spool != "" {
		os.Remove(in.spool)
	}
}
