// Package ipcguard checks untrusted Arrow IPC bytes before arrow-go's
// reader sees them. The reader trusts the lengths it finds in a message's
// flatbuffer: a vector claiming four billion children, or a body claiming
// 32 GB, makes it allocate for them before it looks, which no recover can
// undo (the runtime's out-of-memory is fatal). A Reader reads each
// message's framing and metadata first, checks every length in the
// metadata against the bytes that hold it and the body against a budget,
// and only then passes the message on, byte for byte.
package ipcguard

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
)

// Reader sits between an untrusted Arrow IPC stream and arrow-go's
// reader (see the package doc).
type Reader struct {
	r       io.Reader
	maxMeta int64 // largest metadata block
	maxBody int64 // largest body; bodies also count against budget
	budget  int64 // bytes of bodies left for the whole stream
	pending []byte
	body    int64 // body bytes still to pass through unchecked
	done    bool  // end-of-stream marker seen: pass the rest through
	err     error
	tooBig  bool // err is about a size over the limit
}

// ErrRefused marks what a Reader refused.
var ErrRefused = errors.New("arrow IPC stream refused")

// New returns a Reader of r that refuses message metadata over maxMeta
// bytes, a message body over maxBody and bodies over budget in all.
func New(r io.Reader, maxMeta, maxBody, budget int64) *Reader {
	return &Reader{r: r, maxMeta: maxMeta, maxBody: maxBody, budget: budget}
}

// Err is what the Reader refused, if anything (the reader it feeds may
// have swallowed the error).
func (g *Reader) Err() error { return g.err }

// TooBig tells whether Err is about a body over a limit.
func (g *Reader) TooBig() bool { return g.tooBig }

// CheckSchema checks a serialized schema — an IPC stream whose first
// message is the schema, as Parquet files written from Arrow keep in their
// footer under ARROW:schema — before arrow-go's reader decodes it: its
// framing and metadata lie within data, and it claims no body.
func CheckSchema(data []byte) error {
	g := New(bytes.NewReader(data), int64(len(data)), 0, 0)
	if err := g.nextMessage(); err != nil {
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("%w: no schema message", ErrRefused)
		}
		return err
	}
	return nil
}

func (g *Reader) fail(format string, args ...any) error {
	g.err = fmt.Errorf("%w: %s", ErrRefused, fmt.Sprintf(format, args...))
	return g.err
}

func (g *Reader) Read(p []byte) (int, error) {
	if g.err != nil {
		return 0, g.err
	}
	if len(g.pending) > 0 {
		n := copy(p, g.pending)
		g.pending = g.pending[n:]
		return n, nil
	}
	if g.body > 0 || g.done {
		if g.body > 0 && int64(len(p)) > g.body {
			p = p[:g.body]
		}
		n, err := g.r.Read(p)
		if g.body > 0 {
			g.body -= int64(n)
		}
		return n, err
	}
	if err := g.nextMessage(); err != nil {
		if errors.Is(err, io.EOF) && len(g.pending) > 0 {
			return g.Read(p)
		}
		return 0, err
	}
	return g.Read(p)
}

// nextMessage reads one message's prefix and metadata into pending,
// verified, and sets the body to pass through.
func (g *Reader) nextMessage() error {
	var head [8]byte
	if _, err := io.ReadFull(g.r, head[:4]); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return g.fail("truncated message prefix")
		}
		return err // io.EOF: a stream without an end marker ends here
	}
	cont := binary.LittleEndian.Uint32(head[:4])
	prefix := head[:4]
	metaLen := int64(int32(cont))
	if cont == 0xFFFFFFFF {
		if _, err := io.ReadFull(g.r, head[4:8]); err != nil {
			return g.fail("truncated message length")
		}
		prefix = head[:8]
		metaLen = int64(int32(binary.LittleEndian.Uint32(head[4:8])))
	}
	if metaLen == 0 {
		g.done = true
		g.pending = append(g.pending, prefix...)
		return nil
	}
	if metaLen < 8 || metaLen > g.maxMeta {
		return g.fail("message metadata of %d bytes (at most %d)", metaLen, g.maxMeta)
	}
	meta := make([]byte, metaLen)
	if _, err := io.ReadFull(g.r, meta); err != nil {
		return g.fail("truncated message metadata")
	}
	bodyLen, err := verifyMessage(meta)
	if err != nil {
		return g.fail("message metadata: %v", err)
	}
	if bodyLen > g.maxBody || bodyLen > g.budget {
		g.tooBig = true
		return g.fail("message body of %d bytes is over the limit (%d left of the request's)", bodyLen, min(g.maxBody, g.budget))
	}
	g.budget -= bodyLen
	g.body = bodyLen
	g.pending = append(append(g.pending, prefix...), meta...)
	return nil
}

// A flatbuffer verifier for the parts of Arrow's Message schema that the
// reader turns into allocations: every table, vector and string the
// reader visits must lie inside the buffer.
type fb struct {
	buf   []byte
	depth int
}

const maxDepth = 64

func (f *fb) u32(at int64) (uint32, error) {
	if at < 0 || at+4 > int64(len(f.buf)) {
		return 0, fmt.Errorf("offset %d outside %d bytes", at, len(f.buf))
	}
	return binary.LittleEndian.Uint32(f.buf[at:]), nil
}

func (f *fb) u16(at int64) (uint16, error) {
	if at < 0 || at+2 > int64(len(f.buf)) {
		return 0, fmt.Errorf("offset %d outside %d bytes", at, len(f.buf))
	}
	return binary.LittleEndian.Uint16(f.buf[at:]), nil
}

// table checks the table at pos and returns a field locator.
func (f *fb) table(pos int64) (func(i int) (int64, bool, error), error) {
	so, err := f.u32(pos)
	if err != nil {
		return nil, err
	}
	vt := pos - int64(int32(so))
	vsize, err := f.u16(vt)
	if err != nil {
		return nil, err
	}
	tsize, err := f.u16(vt + 2)
	if err != nil {
		return nil, err
	}
	if vsize < 4 || vsize%2 != 0 || vt+int64(vsize) > int64(len(f.buf)) || pos+int64(tsize) > int64(len(f.buf)) {
		return nil, fmt.Errorf("table at %d has a bad vtable", pos)
	}
	return func(i int) (int64, bool, error) {
		slot := int64(4 + 2*i)
		if slot+2 > int64(vsize) {
			return 0, false, nil
		}
		off, _ := f.u16(vt + slot)
		if off == 0 {
			return 0, false, nil
		}
		if int64(off)+1 > int64(tsize) {
			return 0, false, fmt.Errorf("field %d of the table at %d is outside it", i, pos)
		}
		return pos + int64(off), true, nil
	}, nil
}

// deref follows the offset stored at loc.
func (f *fb) deref(loc int64) (int64, error) {
	o, err := f.u32(loc)
	if err != nil {
		return 0, err
	}
	t := loc + int64(o)
	if t >= int64(len(f.buf)) {
		return 0, fmt.Errorf("offset at %d points outside the buffer", loc)
	}
	return t, nil
}

// vector checks the vector referenced at loc and returns its first
// element's position and length.
func (f *fb) vector(loc, elemSize int64) (int64, int64, error) {
	t, err := f.deref(loc)
	if err != nil {
		return 0, 0, err
	}
	n32, err := f.u32(t)
	if err != nil {
		return 0, 0, err
	}
	n, start := int64(n32), t+4
	if n > (int64(len(f.buf))-start)/elemSize {
		return 0, 0, fmt.Errorf("vector at %d claims %d elements, more than its %d bytes hold", t, n, int64(len(f.buf))-start)
	}
	return start, n, nil
}

// tables checks each table of the vector at loc with check.
func (f *fb) tables(loc int64, check func(pos int64) error) error {
	start, n, err := f.vector(loc, 4)
	if err != nil {
		return err
	}
	for i := range n {
		pos, err := f.deref(start + 4*i)
		if err != nil {
			return err
		}
		if err := check(pos); err != nil {
			return err
		}
	}
	return nil
}

// optional runs check on field i when present.
func optional(field func(int) (int64, bool, error), i int, check func(loc int64) error) error {
	loc, ok, err := field(i)
	if err != nil || !ok {
		return err
	}
	return check(loc)
}

func (f *fb) str(loc int64) error { _, _, err := f.vector(loc, 1); return err }

func (f *fb) keyValues(loc int64) error {
	return f.tables(loc, func(pos int64) error {
		field, err := f.table(pos)
		if err != nil {
			return err
		}
		if err := optional(field, 0, f.str); err != nil {
			return err
		}
		return optional(field, 1, f.str)
	})
}

// plainTable checks a table whose fields are all scalars.
func (f *fb) plainTable(loc int64) error {
	pos, err := f.deref(loc)
	if err != nil {
		return err
	}
	_, err = f.table(pos)
	return err
}

// Arrow flatbuffer type ids (Schema.fbs, union Type) that hold more than
// scalars.
const (
	fbTypeTimestamp = 10
	fbTypeUnion     = 14
)

func (f *fb) field(pos int64) error {
	f.depth++
	defer func() { f.depth-- }()
	if f.depth > maxDepth {
		return fmt.Errorf("fields nested more than %d deep", maxDepth)
	}
	field, err := f.table(pos)
	if err != nil {
		return err
	}
	if err := optional(field, 0, f.str); err != nil { // name
		return err
	}
	typeID := byte(0)
	if loc, ok, err := field(2); err != nil {
		return err
	} else if ok {
		typeID = f.buf[loc]
	}
	err = optional(field, 3, func(loc int64) error { // type
		tpos, err := f.deref(loc)
		if err != nil {
			return err
		}
		tfield, err := f.table(tpos)
		if err != nil {
			return err
		}
		switch typeID {
		case fbTypeTimestamp:
			return optional(tfield, 1, f.str)
		case fbTypeUnion:
			return optional(tfield, 1, func(loc int64) error { _, _, err := f.vector(loc, 4); return err })
		}
		return nil
	})
	if err != nil {
		return err
	}
	err = optional(field, 4, func(loc int64) error { // dictionary encoding
		dpos, err := f.deref(loc)
		if err != nil {
			return err
		}
		dfield, err := f.table(dpos)
		if err != nil {
			return err
		}
		return optional(dfield, 1, f.plainTable)
	})
	if err != nil {
		return err
	}
	if err := optional(field, 5, func(loc int64) error { return f.tables(loc, f.field) }); err != nil { // children
		return err
	}
	return optional(field, 6, f.keyValues)
}

func (f *fb) schema(pos int64) error {
	field, err := f.table(pos)
	if err != nil {
		return err
	}
	if err := optional(field, 1, func(loc int64) error { return f.tables(loc, f.field) }); err != nil {
		return err
	}
	if err := optional(field, 2, f.keyValues); err != nil {
		return err
	}
	return optional(field, 3, func(loc int64) error { _, _, err := f.vector(loc, 8); return err })
}

// maxNodeLength bounds the length a record batch claims for one array:
// arrays are indexed with int, and no request comes near it.
const maxNodeLength = math.MaxInt32

func (f *fb) recordBatch(pos int64) error {
	field, err := f.table(pos)
	if err != nil {
		return err
	}
	if loc, ok, err := field(0); err != nil {
		return err
	} else if ok {
		if loc+8 > int64(len(f.buf)) {
			return fmt.Errorf("record batch length outside the buffer")
		}
		if n := int64(binary.LittleEndian.Uint64(f.buf[loc:])); n < 0 || n > maxNodeLength {
			return fmt.Errorf("record batch claims %d rows", n)
		}
	}
	err = optional(field, 1, func(loc int64) error { // nodes: {length, null_count}
		start, n, err := f.vector(loc, 16)
		if err != nil {
			return err
		}
		for i := range n {
			length := int64(binary.LittleEndian.Uint64(f.buf[start+16*i:]))
			nulls := int64(binary.LittleEndian.Uint64(f.buf[start+16*i+8:]))
			if length < 0 || length > maxNodeLength || nulls < 0 || nulls > length {
				return fmt.Errorf("array %d claims %d values and %d nulls", i, length, nulls)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	err = optional(field, 2, func(loc int64) error { // buffers: {offset, length}
		start, n, err := f.vector(loc, 16)
		if err != nil {
			return err
		}
		for i := range n {
			off := int64(binary.LittleEndian.Uint64(f.buf[start+16*i:]))
			length := int64(binary.LittleEndian.Uint64(f.buf[start+16*i+8:]))
			if off < 0 || length < 0 || off > math.MaxInt64-length {
				return fmt.Errorf("buffer %d has offset %d and length %d", i, off, length)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if err := optional(field, 3, f.plainTable); err != nil { // compression
		return err
	}
	return optional(field, 4, func(loc int64) error { _, _, err := f.vector(loc, 8); return err })
}

// Message header kinds (Message.fbs, union MessageHeader).
const (
	fbSchema          = 1
	fbDictionaryBatch = 2
	fbRecordBatch     = 3
)

// verifyMessage checks an IPC message's metadata and returns the length
// of the body that follows it. Only schemas, dictionary batches and
// record batches are accepted.
func verifyMessage(buf []byte) (bodyLen int64, err error) {
	defer func() {
		if r := recover(); r != nil { // an indexing slip is still a refusal
			err = fmt.Errorf("damaged: %v", r)
		}
	}()
	f := &fb{buf: buf}
	root, err := f.deref(0)
	if err != nil {
		return 0, err
	}
	field, err := f.table(root)
	if err != nil {
		return 0, err
	}
	kind := byte(0)
	if loc, ok, err := field(1); err != nil {
		return 0, err
	} else if ok {
		kind = buf[loc]
	}
	if loc, ok, err := field(3); err != nil {
		return 0, err
	} else if ok {
		if loc+8 > int64(len(buf)) {
			return 0, fmt.Errorf("body length outside the buffer")
		}
		bodyLen = int64(binary.LittleEndian.Uint64(buf[loc:]))
		if bodyLen < 0 {
			return 0, fmt.Errorf("body length %d", bodyLen)
		}
	}
	if err := optional(field, 4, f.keyValues); err != nil {
		return 0, err
	}
	hloc, ok, err := field(2)
	if err != nil {
		return 0, err
	}
	if !ok {
		return 0, fmt.Errorf("message without a header")
	}
	hpos, err := f.deref(hloc)
	if err != nil {
		return 0, err
	}
	switch kind {
	case fbSchema:
		err = f.schema(hpos)
	case fbRecordBatch:
		err = f.recordBatch(hpos)
	case fbDictionaryBatch:
		var dfield func(int) (int64, bool, error)
		if dfield, err = f.table(hpos); err == nil {
			err = optional(dfield, 1, func(loc int64) error {
				rpos, err := f.deref(loc)
				if err != nil {
					return err
				}
				return f.recordBatch(rpos)
			})
		}
	default:
		err = fmt.Errorf("message kind %d is not a schema or a record batch", kind)
	}
	return bodyLen, err
}
