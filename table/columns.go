package table

import (
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/parquet/metadata"
	"github.com/apache/arrow-go/v18/parquet/schema"

	"github.com/stratadb/strata/internal/plant"
	"github.com/stratadb/strata/table/evolve"
	"github.com/stratadb/strata/table/expr"
	"github.com/stratadb/strata/table/format"
)

// layout is where the columns a scan reads lie in one fragment: its
// Parquet leaves, found by stored name (see evolve.go).
type layout struct {
	leaves []int // the leaves to read, in the order of the read columns
	first  []int // by read column: its first leaf; -1 when the fragment lacks it
	// missing: some read column is not in the fragment (added since it
	// was written): it reads as nulls.
	missing bool
	// names and counts: each top-level column of the layout, by stored
	// name, and its number of leaves (planLayout's only).
	names  []string
	counts []int
}

// planLayout is the layout of a fragment written under the table's
// schema as it is: its stored schema's columns, in order.
func (p *scanPlan) planLayout(sc *arrow.Schema) layout {
	p.stored = make(map[string]string, sc.NumFields())
	var l layout
	start := map[string]int{}
	n := 0
	for _, f := range sc.Fields() {
		sn := evolve.StoredName(f)
		p.stored[f.Name] = sn
		start[sn] = n
		c := leafCount(f.Type)
		l.names, l.counts = append(l.names, sn), append(l.counts, c)
		n += c
	}
	// A nested column is read whole: every leaf of it, in order (the
	// Parquet reader rebuilds the column from them).
	for _, c := range p.read {
		i := sc.FieldIndices(c)[0]
		at := start[evolve.StoredName(sc.Field(i))]
		l.first = append(l.first, at)
		for k := range leafCount(sc.Field(i).Type) {
			l.leaves = append(l.leaves, at+k)
		}
	}
	return l
}

// layoutOf is the layout of the fragment whose footer is md: the plan's
// when the fragment's columns are the table's stored schema's (every
// fragment of a table whose schema never changed), otherwise found by
// stored name.
func (p *scanPlan) layoutOf(md *metadata.FileMetaData) *layout {
	root := md.Schema.Root()
	same := root.NumFields() == len(p.lay.names)
	for i := 0; same && i < root.NumFields(); i++ {
		same = root.Field(i).Name() == p.lay.names[i] && nodeLeaves(root.Field(i)) == p.lay.counts[i]
	}
	if plant.On(plant.ColumnsByPosition) && root.NumFields() > len(p.lay.names) {
		same = true
	}
	if same {
		return &p.lay
	}
	type span struct{ start, n int }
	spans := make(map[string]span, root.NumFields())
	n := 0
	for i := range root.NumFields() {
		c := nodeLeaves(root.Field(i))
		if _, dup := spans[root.Field(i).Name()]; !dup {
			spans[root.Field(i).Name()] = span{n, c}
		}
		n += c
	}
	l := &layout{}
	for _, c := range p.read {
		sp, ok := spans[p.stored[c]]
		if !ok {
			l.first, l.missing = append(l.first, -1), true
			continue
		}
		l.first = append(l.first, sp.start)
		for k := range sp.n {
			l.leaves = append(l.leaves, sp.start+k)
		}
	}
	return l
}

// nodeLeaves counts the Parquet leaves under n.
func nodeLeaves(n schema.Node) int {
	g, ok := n.(*schema.GroupNode)
	if !ok {
		return 1
	}
	c := 0
	for i := range g.NumFields() {
		c += nodeLeaves(g.Field(i))
	}
	return c
}

// fill completes a batch read through layout l, which holds the read
// columns the fragment has in order, with nulls for those it lacks; the
// result has the plan's read columns (types as stored: adaptRead converts
// them). The caller releases both.
func (p *scanPlan) fill(l *layout, rec arrow.RecordBatch) arrow.RecordBatch {
	if !l.missing {
		rec.Retain()
		return rec
	}
	n := int(rec.NumRows())
	cols := make([]arrow.Array, len(p.read))
	fields := make([]arrow.Field, len(p.read))
	j := 0
	for i, first := range l.first {
		if first < 0 {
			fields[i] = p.readSchema.Field(i)
			cols[i] = array.MakeArrayOfNull(p.opts.Allocator, fields[i].Type, n)
			continue
		}
		fields[i], cols[i] = rec.Schema().Field(j), rec.Column(j)
		cols[i].Retain()
		j++
	}
	out := array.NewRecordBatch(arrow.NewSchema(fields, nil), cols, int64(n))
	for _, c := range cols {
		c.Release()
	}
	return out
}

// nulls returns a batch of n rows of the plan's read columns, all null:
// a row group of a fragment that has none of them.
func (p *scanPlan) nulls(n int64) arrow.RecordBatch {
	cols := make([]arrow.Array, len(p.read))
	for i, f := range p.readSchema.Fields() {
		cols[i] = array.MakeArrayOfNull(p.opts.Allocator, f.Type, int(n))
	}
	out := array.NewRecordBatch(p.readSchema, cols, n)
	for _, c := range cols {
		c.Release()
	}
	return out
}

// statsOf returns fragment f's manifest statistics by column name: the
// statistics recorded under the column's stored name.
func (p *scanPlan) statsOf(f *format.Fragment) expr.StatsFunc {
	return func(col string) (*format.ColumnStats, int64) {
		if sn, ok := p.stored[col]; ok {
			col = sn
		}
		return f.Stats(col), f.Rows
	}
}

// statsIn returns fragment f's manifest statistics by the names of
// schema sc (see statsOf).
func statsIn(sc *arrow.Schema, f *format.Fragment) expr.StatsFunc {
	return func(col string) (*format.ColumnStats, int64) {
		if idx := sc.FieldIndices(col); len(idx) == 1 {
			col = evolve.StoredName(sc.Field(idx[0]))
		}
		return f.Stats(col), f.Rows
	}
}
