package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"strconv"

	"github.com/stratadb/strata/api"
	"github.com/stratadb/strata/table/value"
)

// decodeTake reads a take's body as it arrives, its keys one at a time,
// and stops at the key past max (413 too_many_keys): a body of millions
// of keys is refused after reading max+1 of them, not held whole.
func decodeTake(body io.Reader, max int) (takeRequest, error) {
	var req takeRequest
	dec := json.NewDecoder(body)
	dec.UseNumber()
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
			return req, fmt.Errorf("unknown field %v (a take's body has column, keys and columns)", tok)
		}
		if err := dec.Decode(dst); err != nil {
			return req, err
		}
	}
	if err := expectDelim(dec, '}'); err != nil {
		return req, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return req, errors.New("more than one JSON value in the body")
	}
	return req, nil
}

// takeRequest is a take's body (api.TakeRequest) as read.
type takeRequest struct {
	Column  string
	Keys    []value.Value
	Columns []string
}

// decodeKeys reads a JSON array (or null) of at most max keys: numbers,
// strings or booleans, which the take converts to the key column's kind.
func decodeKeys(dec *json.Decoder, max int) ([]value.Value, error) {
	tok, err := dec.Token()
	if err != nil || tok == nil {
		return nil, err
	}
	if tok != json.Delim('[') {
		return nil, errors.New("keys must be an array of integers, strings or booleans")
	}
	var keys []value.Value
	for dec.More() {
		if len(keys) == max {
			return nil, &apiError{http.StatusRequestEntityTooLarge, api.CodeTooManyKeys,
				fmt.Sprintf("more than %d keys; a take asks for at most %d (split the request)", max, max)}
		}
		var k any
		if err := dec.Decode(&k); err != nil {
			return nil, err
		}
		v, err := jsonKey(k)
		if err != nil {
			return nil, fmt.Errorf("key %d: %w", len(keys), err)
		}
		keys = append(keys, v)
	}
	return keys, expectDelim(dec, ']')
}

// jsonKey is a JSON key (decoded with UseNumber) as a table value: an
// integer, a string or a boolean.
func jsonKey(k any) (value.Value, error) {
	switch x := k.(type) {
	case bool:
		return value.Bool(x), nil
	case string:
		return value.String(x), nil
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return value.Int(i), nil
		}
		if u, err := strconv.ParseUint(string(x), 10, 64); err == nil {
			return value.Uint(u), nil
		}
		if _, ok := new(big.Int).SetString(string(x), 10); ok {
			return value.Value{}, fmt.Errorf("%s is past the integers a key column holds (64 bits)", x)
		}
		return value.Value{}, fmt.Errorf("%s is not an integer", x)
	}
	return value.Value{}, fmt.Errorf("want an integer, a string or a boolean, not %v", k)
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
