package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/stratadb/strata/api"
)

// decodeTake reads a take's body as it arrives, its keys one at a time,
// and stops at the key past max (413 too_many_keys): a body of millions
// of keys is refused after reading max+1 of them, not held whole.
func decodeTake(body io.Reader, max int) (api.TakeRequest, error) {
	var req api.TakeRequest
	dec := json.NewDecoder(body)
	if err := expectDelim(dec, '{'); err != nil {
		return req, err
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return req, err
		}
		var dst any
		switch tok {
		case "keys":
			if req.Keys, err = decodeKeys(dec, max); err != nil {
				return req, err
			}
			continue
		case "column":
			dst = &req.Column
		case "columns":
			dst = &req.Columns
		default:
			dst = new(json.RawMessage)
		}
		if err := dec.Decode(dst); err != nil {
			return req, err
		}
	}
	return req, expectDelim(dec, '}')
}

// decodeKeys reads a JSON array of integers (or null), at most max.
func decodeKeys(dec *json.Decoder, max int) ([]int64, error) {
	tok, err := dec.Token()
	if err != nil || tok == nil {
		return nil, err
	}
	if tok != json.Delim('[') {
		return nil, errors.New("keys must be an array of integers")
	}
	var keys []int64
	for dec.More() {
		if len(keys) == max {
			return nil, &apiError{http.StatusRequestEntityTooLarge, api.CodeTooManyKeys,
				fmt.Sprintf("more than %d keys; a take asks for at most %d (split the request)", max, max)}
		}
		var k int64
		if err := dec.Decode(&k); err != nil {
			return nil, err
		}
		keys = append(keys, k)
	}
	return keys, expectDelim(dec, ']')
}

func expectDelim(dec *json.Decoder, d json.Delim) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if tok != d {
		return fmt.Errorf("want %s, got %v", d, tok)
	}
	return nil
}
