package command

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/spf13/cobra"

	"github.com/stratadb/strata/api"
	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/table"
	"github.com/stratadb/strata/table/format"
)

func newCreate(env *Env) *cobra.Command {
	var schemaFile, like string
	c := &cobra.Command{
		Use:   "create URL",
		Short: "Create a table from a schema (JSON) or like a Parquet file",
		Long: `create makes version 1 of a new table. The schema comes from a JSON file,
{"fields": [{"name": "id", "type": "int64"}, {"name": "msg", "type": "string", "nullable": true}]}
(types: bool, int8…int64, uint8…uint64, float32, float64, string, binary,
timestamp_us, date32), or from the schema of a Parquet file.

The table's folder name (the URL's last segment) is 1 to 128 of
[A-Za-z0-9._-], not beginning with '.'. A table may sit in another table's
folder ("runs/eval" beside "runs"), but not in one of its own folders (data/,
or one whose name begins with _ or .), nor hold a table in one of its own:
create refuses both, naming the table in the way.`,
		Example: `  strata create file://./events --schema events.schema.json
  strata create 's3://lake/events?endpoint=http://127.0.0.1:9000' --like sample.parquet`,
		Args: ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			if (schemaFile == "") == (like == "") {
				return usageError{fmt.Errorf("give exactly one of --schema and --like")}
			}
			var schema *arrow.Schema
			var err error
			if schemaFile != "" {
				schema, err = readSchemaJSON(schemaFile)
			} else {
				schema, err = parquetSchema(like)
			}
			if err != nil {
				return err
			}
			b, err := env.Open(c.Context(), args[0])
			if err != nil {
				return err
			}
			defer b.Close()
			if err := checkNewTable(c.Context(), env, args[0], b); err != nil {
				return err
			}
			m, _, err := engine.Create(c.Context(), b, schema, "strata", nil)
			if errors.Is(err, format.ErrExists) {
				v := ""
				if latest, lerr := table.LatestVersion(c.Context(), b); lerr == nil && latest > 0 {
					v = fmt.Sprintf(" (at version %d)", latest)
				}
				return fmt.Errorf("%s: a table exists there already%s; append to it (strata append), look at it (strata inspect), or create under another URL: %w", args[0], v, err)
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(env.Out, "created %s (table %s, version %d)\n%s\n", args[0], m.TableID, m.Version, schema)
			return nil
		},
	}
	c.Flags().StringVar(&schemaFile, "schema", "", "JSON schema file")
	c.Flags().StringVar(&like, "like", "", "a Parquet file whose schema to use")
	return c
}

func readSchemaJSON(path string) (*arrow.Schema, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var sj api.Schema
	if err := json.Unmarshal(data, &sj); err != nil {
		return nil, usageError{fmt.Errorf("%s: not a JSON schema: %v", path, err)}
	}
	s, err := sj.ToArrow()
	if err != nil {
		return nil, usageError{fmt.Errorf("%s: %v", path, err)}
	}
	return s, nil
}

func parquetSchema(path string) (*arrow.Schema, error) {
	pf, err := file.OpenParquetFile(path, false)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	defer pf.Close()
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return fr.Schema()
}
