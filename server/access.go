package server

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stratadb/strata/api"
)

// Access. A server with a token (Options.Token) or a tokens file
// (Options.Tokens) answers only requests that carry one of its tokens as
// "Authorization: Bearer TOKEN", and each token may do what its grants
// say:
//
//   - read: describe, scan, count, take, fragments, versions, changes
//     — as a named consumer or a group's member too: setting a
//     consumer's position, joining and leaving a group, which hold back
//     garbage collection for at most the consumer retention — the lists
//     of consumers, tags and indexes, the stats; the Iceberg catalog's
//     loads;
//   - append: describe (a writer needs the schema), append rows; flush
//     and merge (they move appended rows along, changing no row); the
//     Iceberg catalog's commits;
//   - write: update, delete, upsert, overwrite, alter, restore, and all
//     that append may;
//   - admin: create, drop, compaction, garbage collection, tags, indexes,
//     deleting consumers and groups, and all that the others may.
//
// A grant is VERB:PATTERN, where PATTERN matches table names and its *
// stands for any run of characters, slashes too ("runs/*", "*"). The list
// of tables and the Iceberg catalog's lists show the tables a token has
// some grant on; /metrics needs read:* (or --open-metrics); /healthz and
// the OpenAPI document need no grant. The single Options.Token is a
// token with admin:*. The invariants: a request outside its token's
// grants is refused (403) before it opens anything, with a message naming
// the grant it lacks; a token is compared in constant time, by its
// SHA-256; no log line holds a token, only its name.

// Verb is what a grant allows.
type Verb int

// The verbs, each allowing what the ones before it in its line allow:
// Read; Append, Write; Admin allows everything.
const (
	VerbNone Verb = iota
	Read
	Append
	Write
	Admin
	// Describe is what describing a table needs: any grant on it (a
	// refusal names read).
	Describe
)

var verbNames = map[Verb]string{Read: "read", Append: "append", Write: "write", Admin: "admin"}

func (v Verb) String() string {
	if v == Describe {
		return "read"
	}
	return verbNames[v]
}

// covers reports whether a grant of v allows what need asks.
func (v Verb) covers(need Verb) bool {
	switch v {
	case Admin:
		return true
	case Write:
		return need == Write || need == Append || need == Describe
	case Append, Read:
		return need == v || need == Describe
	}
	return false
}

// A Grant allows Verb on the tables whose names match Pattern.
type Grant struct {
	Verb    Verb
	Pattern string
}

func (g Grant) String() string { return g.Verb.String() + ":" + g.Pattern }

// ParseGrant reads VERB:PATTERN: a pattern is made of the characters of
// table names (A-Z a-z 0-9 . _ - /) and *.
func ParseGrant(s string) (Grant, error) {
	verb, pattern, ok := strings.Cut(s, ":")
	if !ok || pattern == "" {
		return Grant{}, fmt.Errorf("grant %q: want VERB:PATTERN, e.g. read:runs/* (verbs: read, append, write, admin)", s)
	}
	if i := strings.IndexFunc(pattern, func(r rune) bool { return !isNameRune(r) && r != '*' && r != '/' }); i >= 0 {
		return Grant{}, fmt.Errorf("grant %q: a pattern holds the characters of table names (A-Z a-z 0-9 . _ - /) and *, not %q", s, pattern[i:i+1])
	}
	for v, name := range verbNames {
		if name == verb {
			return Grant{v, pattern}, nil
		}
	}
	return Grant{}, fmt.Errorf("grant %q: unknown verb %q; want read, append, write or admin", s, verb)
}

func isNameRune(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-'
}

// checkTokenName refuses a token's name the tokens file cannot hold.
func checkTokenName(name string) error {
	if name == "" || len(name) > 64 || strings.IndexFunc(name, func(r rune) bool { return !isNameRune(r) }) >= 0 {
		return fmt.Errorf("token name %q: want 1 to 64 of A-Z a-z 0-9 . _ -", name)
	}
	if strings.HasPrefix(name, tokenPrefix) {
		// It looks like a token: the log, which names tokens, would show it.
		return fmt.Errorf("a token's name does not begin with %s, as tokens do", tokenPrefix)
	}
	return nil
}

// matches reports whether pattern, whose * stands for any run of
// characters, matches the whole of name.
func matches(pattern, name string) bool {
	parts := strings.Split(pattern, "*")
	if len(parts) == 1 {
		return pattern == name
	}
	if !strings.HasPrefix(name, parts[0]) {
		return false
	}
	name = name[len(parts[0]):]
	last := parts[len(parts)-1]
	for _, p := range parts[1 : len(parts)-1] {
		i := strings.Index(name, p)
		if i < 0 {
			return false
		}
		name = name[i+len(p):]
	}
	return len(name) >= len(last) && strings.HasSuffix(name, last)
}

// principal is who a request's token says it is.
type principal struct {
	name   string
	grants []Grant
}

// allows reports whether p may do need on table; the grant it lacks, when
// not.
func (p *principal) allows(need Verb, table string) bool {
	if p == nil {
		return true // no token configured: the server is open
	}
	for _, g := range p.grants {
		if g.Verb.covers(need) && matches(g.Pattern, table) {
			return true
		}
	}
	return false
}

// seesTable reports whether p holds any grant on table (it is listed).
func (p *principal) seesTable(table string) bool { return p.allows(Describe, table) }

func (p *principal) refuse(need Verb, table string) error {
	var have []string
	for _, g := range p.grants {
		have = append(have, g.String())
	}
	return &apiError{http.StatusForbidden, api.CodeForbidden, fmt.Sprintf(
		"token %q lacks the grant %s:%s for this request (it holds %s)", p.name, need, table, strings.Join(have, " "))}
}

type principalKey struct{}

func principalOf(ctx context.Context) *principal {
	p, _ := ctx.Value(principalKey{}).(*principal)
	return p
}

// may refuses (403) a request whose token lacks need on table.
func may(r *http.Request, need Verb, table string) error {
	if p := principalOf(r.Context()); !p.allows(need, table) {
		return p.refuse(need, table)
	}
	return nil
}

// Tokens is a tokens file, read again by Reload. The file has a token per
// line: its SHA-256 in hex, its name, and its grants, separated by
// blanks; # begins a comment:
//
//	# sha256                                                         name       grants
//	9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08 dashboard  read:*
//	60303ae22b998861bce3b28f33eec1be758a213c86c93c076dbe9f558c11c752 fleet      append:runs/* read:runs/*
//
// strata token new prints a fresh token and its line.
type Tokens struct {
	path string
	set  atomic.Pointer[tokenSet]
	mu   sync.Mutex        // one Reload at a time
	sum  [sha256.Size]byte // of the file's text as last read
}

type tokenSet struct {
	hashes [][sha256.Size]byte
	who    []principal
}

// LoadTokens reads the tokens file at path.
func LoadTokens(path string) (*Tokens, error) {
	t := &Tokens{path: path}
	if err := t.Reload(); err != nil {
		return nil, err
	}
	return t, nil
}

// ParseTokens reads a tokens file's text; name says where it is, in errors.
func parseTokens(name string, text []byte) (*tokenSet, error) {
	set := &tokenSet{}
	seen := map[string]int{}
	sc := bufio.NewScanner(bytes.NewReader(text))
	for n := 1; sc.Scan(); n++ {
		line, _, _ := strings.Cut(sc.Text(), "#")
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		if len(fields) < 3 {
			return nil, fmt.Errorf("%s:%d: want SHA256 NAME GRANT..., e.g. %s fleet append:runs/*", name, n, strings.Repeat("0", 64))
		}
		sum, err := hex.DecodeString(fields[0])
		if err != nil || len(sum) != sha256.Size {
			return nil, fmt.Errorf("%s:%d: %q is not a SHA-256 in hex (64 digits): the file holds tokens' hashes, never tokens", name, n, short(fields[0]))
		}
		if prev, ok := seen[fields[0]]; ok {
			return nil, fmt.Errorf("%s:%d: the token of line %d again", name, n, prev)
		}
		seen[fields[0]] = n
		// A field in the wrong place may be a token pasted there: the
		// errors name fields by number, not by what they hold.
		if checkTokenName(fields[1]) != nil {
			return nil, fmt.Errorf("%s:%d: field 2 is not a token's name (1 to 64 of A-Z a-z 0-9 . _ -, not beginning with %s)", name, n, tokenPrefix)
		}
		p := principal{name: fields[1]}
		for i, f := range fields[2:] {
			g, err := ParseGrant(f)
			if err != nil {
				return nil, fmt.Errorf("%s:%d: field %d is not a grant: want VERB:PATTERN, the verbs read, append, write and admin, a pattern of the characters of table names and *", name, n, i+3)
			}
			p.grants = append(p.grants, g)
		}
		set.hashes = append(set.hashes, [sha256.Size]byte(sum))
		set.who = append(set.who, p)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return set, nil
}

// short is the start of what may be a token pasted by mistake: enough
// to find the line, not enough to use it.
func short(s string) string {
	if len(s) > 6 {
		return s[:6] + "…"
	}
	return s
}

// Reload reads the file again; on an error the tokens read before stay.
func (t *Tokens) Reload() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	text, err := os.ReadFile(t.path)
	if err != nil {
		return fmt.Errorf("tokens file: %w", err)
	}
	// A file that fails is tried again when it changes again, not at
	// every look.
	t.sum = sha256.Sum256(text)
	set, err := parseTokens(t.path, text)
	if err != nil {
		return err
	}
	t.set.Store(set)
	return nil
}

// Watch reloads the file when its text changes (compared by SHA-256: an
// edit that keeps the size within a clock tick counts), looking every
// interval until ctx ends; report hears each reload's outcome (nil: the
// new tokens are in use).
func (t *Tokens) Watch(ctx context.Context, interval time.Duration, report func(error)) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		text, err := os.ReadFile(t.path)
		t.mu.Lock()
		changed := err == nil && sha256.Sum256(text) != t.sum
		t.mu.Unlock()
		if changed {
			report(t.Reload())
		}
	}
}

// Len is how many tokens the file holds.
func (t *Tokens) Len() int { return len(t.set.Load().hashes) }

// lookup finds the token's principal, comparing its hash with every
// line's in constant time.
func (t *Tokens) lookup(token string) *principal {
	if t == nil {
		return nil
	}
	sum := sha256.Sum256([]byte(token))
	set := t.set.Load()
	found := -1
	for i := range set.hashes {
		if subtle.ConstantTimeCompare(sum[:], set.hashes[i][:]) == 1 {
			found = i
		}
	}
	if found < 0 {
		return nil
	}
	return &set.who[found]
}

// NewToken makes a random token and its line for a tokens file.
func NewToken(name string, grants []Grant) (token, line string, err error) {
	if err := checkTokenName(name); err != nil {
		return "", "", err
	}
	if len(grants) == 0 {
		return "", "", errors.New("a token needs at least one grant, e.g. read:runs/*")
	}
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", "", err
	}
	token = tokenPrefix + base64.RawURLEncoding.EncodeToString(b[:])
	sum := sha256.Sum256([]byte(token))
	var gs []string
	for _, g := range grants {
		gs = append(gs, g.String())
	}
	return token, fmt.Sprintf("%x %s %s", sum, name, strings.Join(gs, " ")), nil
}

// tokenPrefix begins every token NewToken makes, so that a secret
// scanner, or a reader of a file, knows one.
const tokenPrefix = "strata_"

// adminToken is the principal of Options.Token.
var adminToken = principal{name: "token", grants: []Grant{{Admin, "*"}}}

// authenticate finds the request's principal: nil and true when the
// server has no token (it is open); false when the request must be
// refused (401), with the message why.
func (s *Server) authenticate(r *http.Request) (p *principal, ok bool, why string) {
	if s.opts.Token == "" && s.opts.Tokens == nil {
		return nil, true, ""
	}
	auth := r.Header.Get("Authorization")
	if len(auth) <= 7 || !strings.EqualFold(auth[:7], "Bearer ") { // the scheme's name is any case (RFC 7235)
		return nil, false, "a bearer token is required: send Authorization: Bearer TOKEN (the token strata serve was given)"
	}
	got := auth[7:]
	if s.opts.Token != "" && subtle.ConstantTimeCompare([]byte(got), []byte(s.opts.Token)) == 1 {
		return &adminToken, true, ""
	}
	if p := s.opts.Tokens.lookup(got); p != nil {
		return p, true, ""
	}
	return nil, false, "the bearer token is not this server's: check the token the client was given against strata serve's"
}
