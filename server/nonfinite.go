package server

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"math"
)

// nonFiniteWords are the bare words JSON has no number for that Python's
// json module writes, as do this server's JSON lines answers (NaN) and
// appends of JSON lines take.
var nonFiniteWords = []struct {
	word string
	f    float64
}{{"NaN", math.NaN()}, {"Infinity", math.Inf(1)}, {"-Infinity", math.Inf(-1)}}

// nonFiniteBody is a JSON body whose bare NaN, Infinity and -Infinity
// values are rewritten as {"<key>": "WORD"}, which encoding/json reads and
// float turns back into the float. key is drawn at random for each body,
// so that no value a client writes stands for one.
type nonFiniteBody struct {
	data []byte
	key  string
}

// readNonFinite rewrites the bare words NaN, Infinity and -Infinity that
// stand as a whole value inside an object or an array (after ':', ',' or
// '[', before ',', '}', ']' or white space). Outside strings, valid JSON
// holds no letters but true, false and null, so such a word is part of
// nothing else; anything else is left as it is, for the decoder to refuse
// as it was sent.
func readNonFinite(body []byte) nonFiniteBody {
	var nonce [8]byte
	_, _ = rand.Read(nonce[:])
	nb := nonFiniteBody{data: body, key: "nonfinite-" + hex.EncodeToString(nonce[:])}
	var out []byte
	inString, escaped := false, false
	depth, last := 0, 0
	var prev byte // the last byte outside strings that is not white space
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
		switch c {
		case '"':
			inString = true
		case '{', '[':
			depth++
		case '}', ']':
			depth--
		}
		if depth > 0 && (prev == ':' || prev == ',' || prev == '[') {
			if w, ok := nonFiniteAt(body, i); ok {
				out = append(out, body[last:i]...)
				out = append(out, `{"`+nb.key+`":"`+w+`"}`...)
				i += len(w) - 1
				last, prev = i+1, '}'
				continue
			}
		}
		if c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			prev = c
		}
	}
	if out != nil {
		nb.data = append(out, body[last:]...)
	}
	return nb
}

// nonFiniteAt is the bare word that stands whole at body[i:], if any.
func nonFiniteAt(body []byte, i int) (string, bool) {
	for _, w := range nonFiniteWords {
		if !bytes.HasPrefix(body[i:], []byte(w.word)) {
			continue
		}
		if end := i + len(w.word); end == len(body) || bytes.IndexByte([]byte(",}] \t\n\r"), body[end]) >= 0 {
			return w.word, true
		}
	}
	return "", false
}

// float is the float a value readNonFinite wrote stands for.
func (nb nonFiniteBody) float(m map[string]any) (float64, bool) {
	if len(m) != 1 {
		return 0, false
	}
	w, ok := m[nb.key].(string)
	for _, x := range nonFiniteWords {
		if ok && w == x.word {
			return x.f, true
		}
	}
	return 0, false
}
