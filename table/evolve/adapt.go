package evolve

import (
	"context"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// adapt returns arr as type want, without losing a value: the same type;
// the same physical layout under other field names or nullability
// (relabelled without a copy; nulls are checked separately); dictionary
// values decoded; integers widened (signed to wider signed, unsigned to
// wider unsigned or signed); float32 to float64; string and binary to
// their large forms and back; timestamps of the same zone to a finer unit
// (overflow is an error). Anything else is refused with both types named.
func adapt(mem memory.Allocator, want arrow.DataType, arr arrow.Array, path string) (arrow.Array, error) {
	got := arr.DataType()
	if want == got {
		arr.Retain()
		return arr, nil
	}
	if sameLayout(want, got) {
		// Equal types too: the batch then carries the table's own type
		// values, which arrow-go's checks compare by identity first.
		return RelabelArray(want, arr), nil
	}
	mismatch := func(reason string) error {
		return &InputError{Row: -1, Column: path, Want: want.String(), Got: got.String(), Reason: reason, Schema: true}
	}
	if d, ok := arr.(*array.Dictionary); ok {
		ctx := compute.WithAllocator(context.Background(), mem)
		values, err := compute.TakeArray(ctx, d.Dictionary(), d.Indices())
		if err != nil {
			return nil, mismatch("dictionary does not decode: " + err.Error())
		}
		defer values.Release()
		return adapt(mem, want, values, path)
	}
	if !losslessCast(want, got) {
		return nil, mismatch("the type cannot be converted without loss")
	}
	switch want.(type) {
	case *arrow.StructType, *arrow.MapType, *arrow.ListType, *arrow.LargeListType:
		return castNested(mem, want, arr, path)
	}
	ctx := compute.WithAllocator(context.Background(), mem)
	out, err := compute.CastArray(ctx, arr, compute.SafeCastOptions(want))
	if err != nil {
		return nil, mismatch("conversion failed: " + err.Error())
	}
	return out, nil
}

// castNested converts a nested array child by child (adapt), keeping its
// own buffers (validity, offsets) as they are.
func castNested(mem memory.Allocator, want arrow.DataType, arr arrow.Array, path string) (arrow.Array, error) {
	d := arr.Data()
	var wantChildren []arrow.DataType
	var names []string
	switch w := want.(type) {
	case *arrow.StructType:
		for _, f := range w.Fields() {
			wantChildren, names = append(wantChildren, f.Type), append(names, path+"."+f.Name)
		}
	case *arrow.MapType:
		wantChildren, names = []arrow.DataType{w.Elem()}, []string{path}
	case arrow.ListLikeType:
		wantChildren, names = []arrow.DataType{w.Elem()}, []string{path + "[]"}
	}
	children := make([]arrow.ArrayData, len(wantChildren))
	defer func() {
		for _, c := range children {
			if c != nil {
				c.Release()
			}
		}
	}()
	for i, cd := range d.Children() {
		in := array.MakeFromData(cd)
		out, err := adapt(mem, wantChildren[i], in, names[i])
		in.Release()
		if err != nil {
			return nil, err
		}
		children[i] = out.Data()
		children[i].Retain()
		out.Release()
	}
	nd := array.NewData(want, d.Len(), d.Buffers(), children, d.NullN(), d.Offset())
	defer nd.Release()
	return array.MakeFromData(nd), nil
}

// losslessCast: the conversions adapt makes with a safe cast, which
// fails on any value that would not survive: integers widened; float32
// to float64; string and binary to and from their large forms;
// timestamps of one zone to another unit (to a finer one always; to a
// coarser one when every value is whole in it — Parquet files keep no
// seconds, so a timestamp[s] column comes back from one as milliseconds);
// and lists, structs (same field names) and maps of those.
func losslessCast(want, got arrow.DataType) bool {
	w, g := want.ID(), got.ID()
	rank := func(id arrow.Type) int {
		switch id {
		case arrow.INT8, arrow.UINT8:
			return 1
		case arrow.INT16, arrow.UINT16:
			return 2
		case arrow.INT32, arrow.UINT32:
			return 3
		case arrow.INT64, arrow.UINT64:
			return 4
		}
		return 0
	}
	signed := func(id arrow.Type) bool {
		return id == arrow.INT8 || id == arrow.INT16 || id == arrow.INT32 || id == arrow.INT64
	}
	unsigned := func(id arrow.Type) bool {
		return id == arrow.UINT8 || id == arrow.UINT16 || id == arrow.UINT32 || id == arrow.UINT64
	}
	same := func(a, b arrow.DataType) bool { return sameLayout(a, b) || losslessCast(a, b) }
	switch {
	case signed(w) && signed(g):
		return rank(w) > rank(g)
	case unsigned(w) && unsigned(g):
		return rank(w) > rank(g)
	case signed(w) && unsigned(g):
		return rank(w) > rank(g)
	case w == arrow.FLOAT64 && g == arrow.FLOAT32:
		return true
	case (w == arrow.STRING || w == arrow.LARGE_STRING) && (g == arrow.STRING || g == arrow.LARGE_STRING):
		return true
	case (w == arrow.BINARY || w == arrow.LARGE_BINARY) && (g == arrow.BINARY || g == arrow.LARGE_BINARY):
		return true
	case w == arrow.TIMESTAMP && g == arrow.TIMESTAMP:
		return want.(*arrow.TimestampType).TimeZone == got.(*arrow.TimestampType).TimeZone
	case w == g && (w == arrow.LIST || w == arrow.LARGE_LIST):
		return same(want.(arrow.ListLikeType).Elem(), got.(arrow.ListLikeType).Elem())
	case w == arrow.MAP && g == arrow.MAP:
		wm, gm := want.(*arrow.MapType), got.(*arrow.MapType)
		return same(wm.KeyType(), gm.KeyType()) && same(wm.ItemType(), gm.ItemType())
	case w == arrow.STRUCT && g == arrow.STRUCT:
		ws, gs := want.(*arrow.StructType), got.(*arrow.StructType)
		if ws.NumFields() != gs.NumFields() {
			return false
		}
		for i := range ws.NumFields() {
			if ws.Field(i).Name != gs.Field(i).Name || !same(ws.Field(i).Type, gs.Field(i).Type) {
				return false
			}
		}
		return true
	}
	return false
}

// sameLayout reports whether two types have the same physical layout,
// differing at most in field names and nullability of nested fields.
func sameLayout(a, b arrow.DataType) bool {
	if a.ID() != b.ID() {
		return false
	}
	switch a := a.(type) {
	case *arrow.StructType:
		bs := b.(*arrow.StructType)
		if a.NumFields() != bs.NumFields() {
			return false
		}
		for i := range a.NumFields() {
			if a.Field(i).Name != bs.Field(i).Name || !sameLayout(a.Field(i).Type, bs.Field(i).Type) {
				return false
			}
		}
		return true
	case *arrow.MapType:
		bm := b.(*arrow.MapType)
		return sameLayout(a.KeyType(), bm.KeyType()) && sameLayout(a.ItemType(), bm.ItemType())
	case arrow.ListLikeType:
		return sameLayout(a.Elem(), b.(arrow.ListLikeType).Elem())
	}
	return TypesEqual(a, b)
}

// RelabelArray is arr under the type want, of the same layout.
func RelabelArray(want arrow.DataType, arr arrow.Array) arrow.Array {
	d := relabel(want, arr.Data())
	defer d.Release()
	return array.MakeFromData(d)
}

// relabel gives data the type want, which has the same layout; children
// are relabelled in turn. The buffers are shared.
func relabel(want arrow.DataType, d arrow.ArrayData) arrow.ArrayData {
	var children []arrow.ArrayData
	switch w := want.(type) {
	case *arrow.StructType:
		for i, c := range d.Children() {
			children = append(children, relabel(w.Field(i).Type, c))
		}
	case *arrow.MapType:
		children = []arrow.ArrayData{relabel(w.Elem(), d.Children()[0])}
	case arrow.ListLikeType:
		children = []arrow.ArrayData{relabel(w.Elem(), d.Children()[0])}
	}
	out := array.NewData(want, d.Len(), d.Buffers(), children, d.NullN(), d.Offset())
	for _, c := range children {
		c.Release()
	}
	return out
}
