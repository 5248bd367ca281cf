// Package rollouts generates the rows of the benchmark workload that
// docs/benchmark.md defines: rows of RL rollouts that are a pure function
// of (seed, id), bit-exact, so every system fed the same parameters stores
// the same logical rows.
package rollouts

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"hash"
	"math"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// RowBytes is the logical size of one row: 8+3+8+8+8+256+2048.
const RowBytes = 2339

// IDBase separates workers' ids: id = worker*IDBase + seq.
const IDBase = 1_000_000_000

// TSBase is added to the id to make the row's timestamp (µs).
const TSBase = 1_700_000_000_000_000

var words = strings.Fields(`alpha bravo charlie delta echo foxtrot golf hotel
india juliet kilo lima mike november oscar papa quebec romeo sierra tango
uniform victor whiskey xray yankee zulu apple banana cherry grape lemon
mango olive peach pear plum river stone cloud storm light shadow forest
desert ocean island valley mountain reward policy agent action state value
model token prompt answer search train learn score batch epoch`)

// Schema is the rollouts table's schema.
var Schema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "worker", Type: arrow.BinaryTypes.String},
	{Name: "step", Type: arrow.PrimitiveTypes.Int64},
	{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}},
	{Name: "reward", Type: arrow.PrimitiveTypes.Float64},
	{Name: "prompt", Type: arrow.BinaryTypes.String},
	{Name: "artifact", Type: arrow.BinaryTypes.Binary},
}, nil)

// Row is one generated row.
type Row struct {
	ID       int64
	Worker   string
	Step     int64
	TS       int64
	Reward   float64
	Prompt   string
	Artifact []byte
}

func fmix32(x uint32) uint32 {
	x ^= x >> 16
	x *= 0x85ebca6b
	x ^= x >> 13
	x *= 0xc2b2ae35
	x ^= x >> 16
	return x
}

type mulberry struct{ state uint32 }

func (m *mulberry) next() uint32 {
	m.state += 0x6d2b79f5
	t := (m.state ^ m.state>>15) * (1 | m.state)
	t = (t + (t^t>>7)*(61|t)) ^ t
	return t ^ t>>14
}

// Generate returns the row of worker w and sequence number seq.
func Generate(seed uint32, w int, seq int64) Row {
	id := int64(w)*IDBase + seq
	g := mulberry{state: fmix32(fmix32(fmix32(seed^0x9e3779b9)^uint32(id)) ^ uint32(uint64(id)>>32))}
	r := Row{ID: id, Worker: fmt.Sprintf("w%02d", w), Step: seq, TS: TSBase + id}
	hi := g.next() >> 5
	lo := g.next() >> 6
	r.Reward = (float64(hi)*67108864 + float64(lo)) / math.Exp2(53)
	var sb strings.Builder
	for sb.Len() < 256 {
		if sb.Len() > 0 {
			sb.WriteByte(' ')
		}
		sb.WriteString(words[g.next()>>26])
	}
	r.Prompt = sb.String()[:256]
	r.Artifact = make([]byte, 2048)
	for i := range 256 {
		binary.LittleEndian.PutUint32(r.Artifact[4*i:], g.next())
	}
	return r
}

// Batch builds the record batch of worker w's rows seq0 … seq0+n-1.
func Batch(mem memory.Allocator, seed uint32, w int, seq0 int64, n int) arrow.RecordBatch {
	if mem == nil {
		mem = memory.DefaultAllocator
	}
	b := array.NewRecordBuilder(mem, Schema)
	defer b.Release()
	ids := b.Field(0).(*array.Int64Builder)
	workers := b.Field(1).(*array.StringBuilder)
	steps := b.Field(2).(*array.Int64Builder)
	tss := b.Field(3).(*array.TimestampBuilder)
	rewards := b.Field(4).(*array.Float64Builder)
	prompts := b.Field(5).(*array.StringBuilder)
	arts := b.Field(6).(*array.BinaryBuilder)
	prompts.ReserveData(256 * n)
	arts.ReserveData(2048 * n)
	for i := range n {
		r := Generate(seed, w, seq0+int64(i))
		ids.Append(r.ID)
		workers.Append(r.Worker)
		steps.Append(r.Step)
		tss.Append(arrow.Timestamp(r.TS))
		rewards.Append(r.Reward)
		prompts.Append(r.Prompt)
		arts.Append(r.Artifact)
	}
	return b.NewRecordBatch()
}

// BatchAs builds worker w's rows seq0 … seq0+n-1 under schema: each of
// its columns the rollouts column of that name, or nulls where there is
// none (a column an engine's schema has and the rows do not). The types
// must be the rollouts columns' own.
func BatchAs(mem memory.Allocator, schema *arrow.Schema, seed uint32, w int, seq0 int64, n int) arrow.RecordBatch {
	if mem == nil {
		mem = memory.DefaultAllocator
	}
	src := Batch(mem, seed, w, seq0, n)
	defer src.Release()
	cols := make([]arrow.Array, schema.NumFields())
	for i, f := range schema.Fields() {
		if j := Schema.FieldIndices(f.Name); len(j) == 1 {
			cols[i] = src.Column(j[0])
			cols[i].Retain()
		} else {
			cols[i] = array.MakeArrayOfNull(mem, f.Type, n)
		}
	}
	defer func() {
		for _, c := range cols {
			c.Release()
		}
	}()
	return array.NewRecordBatch(schema, cols, int64(n))
}

// Digest accumulates the SHA-256 of rows laid out as their 2,339 logical
// bytes (id LE, worker, step LE, ts LE, reward float64 LE, prompt,
// artifact).
type Digest struct{ h hash.Hash }

// NewDigest starts a digest.
func NewDigest() *Digest { return &Digest{h: sha256.New()} }

// Add adds one row.
func (d *Digest) Add(r Row) {
	var buf [8]byte
	binary.LittleEndian.PutUint64(buf[:], uint64(r.ID))
	d.h.Write(buf[:])
	d.h.Write([]byte(r.Worker))
	binary.LittleEndian.PutUint64(buf[:], uint64(r.Step))
	d.h.Write(buf[:])
	binary.LittleEndian.PutUint64(buf[:], uint64(r.TS))
	d.h.Write(buf[:])
	binary.LittleEndian.PutUint64(buf[:], math.Float64bits(r.Reward))
	d.h.Write(buf[:])
	d.h.Write([]byte(r.Prompt))
	d.h.Write(r.Artifact)
}

// Sum returns the hex digest.
func (d *Digest) Sum() string { return fmt.Sprintf("%x", d.h.Sum(nil)) }

// RowsOf reads the rows of a batch of the rollouts schema.
func RowsOf(rec arrow.RecordBatch) []Row {
	n := int(rec.NumRows())
	out := make([]Row, n)
	ids := rec.Column(0).(*array.Int64)
	workers := rec.Column(1).(*array.String)
	steps := rec.Column(2).(*array.Int64)
	tss := rec.Column(3).(*array.Timestamp)
	rewards := rec.Column(4).(*array.Float64)
	prompts := rec.Column(5).(*array.String)
	arts := rec.Column(6).(*array.Binary)
	for i := range n {
		out[i] = Row{ID: ids.Value(i), Worker: workers.Value(i), Step: steps.Value(i), TS: int64(tss.Value(i)),
			Reward: rewards.Value(i), Prompt: prompts.Value(i), Artifact: append([]byte(nil), arts.Value(i)...)}
	}
	return out
}
