package server

import (
	"bytes"
	"math"
)

// nonFiniteKey marks, in a JSON body read by readNonFinite, a value
// written as a bare NaN, Infinity or -Infinity.
const nonFiniteKey = "\x00float"

// nonFiniteWords are the bare words JSON has no number for that Python's
// json module writes, as do this server's JSON lines answers (NaN) and
// appends of JSON lines take.
var nonFiniteWords = []struct {
	word string
	f    float64
}{{"NaN", math.NaN()}, {"Infinity", math.Inf(1)}, {"-Infinity", math.Inf(-1)}}

// readNonFinite rewrites the bare words NaN, Infinity and -Infinity
// outside a JSON body's strings as {"\u0000float": "WORD"}, which
// encoding/json reads and nonFinite turns back into the float. Outside
// strings, valid JSON holds no letters but true, false and null, so the
// words cannot be part of anything else.
func readNonFinite(body []byte) []byte {
	var out []byte
	inString, escaped := false, false
	last := 0
	for i := 0; i < len(body); i++ {
		c := body[i]
		if inString {
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			continue
		}
		if c == '"' {
			inString = true
			continue
		}
		for _, w := range nonFiniteWords {
			if bytes.HasPrefix(body[i:], []byte(w.word)) {
				out = append(out, body[last:i]...)
				out = append(out, `{"\u0000float":"`+w.word+`"}`...)
				i += len(w.word) - 1
				last = i + 1
				break
			}
		}
	}
	if out == nil {
		return body
	}
	return append(out, body[last:]...)
}

// nonFinite is the float a value readNonFinite wrote stands for.
func nonFinite(m map[string]any) (float64, bool) {
	if len(m) != 1 {
		return 0, false
	}
	w, ok := m[nonFiniteKey].(string)
	for _, x := range nonFiniteWords {
		if ok && w == x.word {
			return x.f, true
		}
	}
	return 0, false
}
