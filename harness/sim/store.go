package sim

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/stratadb/strata/blob"
)

// Clock is the simulation's clock: the wall clock plus an offset that only
// the simulation moves. Moving it is how a stall longer than garbage
// collection's safety age happens in an instant.
type Clock struct {
	mu     sync.Mutex
	offset time.Duration
}

// Now returns the simulated time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.offset)
}

// Advance moves the clock on by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.offset += d
	c.mu.Unlock()
}

// Store is an in-memory blob.Bucket whose objects carry the simulated
// clock's time, so that garbage collection judges ages on that clock.
// It can make a listing omit a just-created key for a few listings (as a
// store whose listings lag behind its writes does), and it records every
// manifest created, for the oracles.
type Store struct {
	clock *Clock

	mu      sync.Mutex
	objs    map[string]*object
	lag     *rand.Rand       // nil: listings are consistent
	kin     map[string]int64 // objects created so far, by name without its random part
	served  int64            // requests served: the store's measure of "a moment"
	omitted int64
	// created counts, by key, the successful creates of each manifest.
	created map[string]int
	// onCreate is called (without the lock) after a manifest is created.
	onCreate func(key string, data []byte, again bool)
	// overwrites lists manifest keys written by an unconditional Put over
	// an existing object.
	overwrites []string
}

type object struct {
	kin         int64 // order of creation among objects named alike (stableName)
	data        []byte
	mod         time.Time
	hiddenUntil int64 // listings omit it until the store has served this many requests
}

// MaxListLag bounds how long a listing may leave out a new object, on the
// simulated clock: a store's listings lag by seconds, far less than
// garbage collection's safety age.
const MaxListLag = 30 * time.Second

// NewStore returns an empty store on clock. With listLag, half the new
// objects are left out of listings for a moment: until the store has
// served up to 20 more requests (drawn with seed), and no longer than
// MaxListLag.
func NewStore(clock *Clock, listLag bool, seed uint64) *Store {
	s := &Store{clock: clock, objs: map[string]*object{}, created: map[string]int{}}
	if listLag {
		s.lag = rand.New(rand.NewPCG(seed, 0x11571a9))
	}
	return s
}

var _ blob.Bucket = (*Store)(nil)

func notFound(op, key string) error {
	return &blob.Error{Op: op, Key: key, Kind: blob.ErrNotFound}
}

// Get implements blob.Bucket.
func (s *Store) Get(ctx context.Context, key string) ([]byte, error) {
	s.mu.Lock()
	s.served++
	defer s.mu.Unlock()
	o, ok := s.objs[key]
	if !ok {
		return nil, notFound("get", key)
	}
	return bytes.Clone(o.data), nil
}

// NewRangeReader implements blob.Bucket.
func (s *Store) NewRangeReader(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	s.mu.Lock()
	s.served++
	defer s.mu.Unlock()
	o, ok := s.objs[key]
	if !ok {
		return nil, notFound("range-get", key)
	}
	data := o.data[min(offset, int64(len(o.data))):]
	if length >= 0 && length < int64(len(data)) {
		data = data[:length]
	}
	return io.NopCloser(bytes.NewReader(bytes.Clone(data))), nil
}

// PutIfAbsent implements blob.Bucket.
func (s *Store) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	s.mu.Lock()
	s.served++
	if _, ok := s.objs[key]; ok {
		s.mu.Unlock()
		return &blob.Error{Op: "put-if-absent", Key: key, Kind: blob.ErrExists}
	}
	s.put(key, bytes.Clone(data))
	manifest := isManifest(key)
	if manifest {
		s.created[key]++
	}
	again := s.created[key] > 1
	hook := s.onCreate
	s.mu.Unlock()
	if manifest && hook != nil {
		hook(key, data, again)
	}
	return nil
}

// Put implements blob.Bucket.
func (s *Store) Put(ctx context.Context, key string, r io.Reader) error {
	data, err := io.ReadAll(r)
	if err != nil {
		return &blob.Error{Op: "put", Key: key, Kind: blob.ErrRetryable, Err: err}
	}
	s.mu.Lock()
	s.served++
	defer s.mu.Unlock()
	if _, ok := s.objs[key]; ok && isManifest(key) {
		s.overwrites = append(s.overwrites, key)
	}
	s.put(key, data)
	return nil
}

func (s *Store) put(key string, data []byte) {
	o := &object{data: data, mod: s.clock.Now()}
	if randomPart.MatchString(key) {
		if s.kin == nil {
			s.kin = map[string]int64{}
		}
		alike := randomPart.ReplaceAllString(key, "*")
		s.kin[alike]++
		o.kin = s.kin[alike]
	}
	if old, ok := s.objs[key]; ok {
		// Written over: a listing goes on showing the key as it did
		// (a lagging listing may show old metadata, not lose the key).
		o.hiddenUntil = old.hiddenUntil
	} else if s.lag != nil && s.lag.IntN(2) == 0 {
		o.hiddenUntil = s.served + 1 + int64(s.lag.IntN(20))
	}
	s.objs[key] = o
}

// Delete implements blob.Bucket.
func (s *Store) Delete(ctx context.Context, key string) error {
	s.mu.Lock()
	s.served++
	defer s.mu.Unlock()
	if _, ok := s.objs[key]; !ok {
		return notFound("delete", key)
	}
	delete(s.objs, key)
	return nil
}

// DeleteBatch implements blob.BatchDeleter: one request, whose keys go
// one at a time, last first (an order of its own; S3 promises none), other
// requests running between them.
func (s *Store) DeleteBatch(ctx context.Context, keys []string) error {
	if len(keys) == 0 {
		return nil
	}
	s.mu.Lock()
	s.served++
	s.mu.Unlock()
	for i := len(keys) - 1; i >= 0; i-- {
		s.mu.Lock()
		delete(s.objs, keys[i])
		s.mu.Unlock()
	}
	return nil
}

// ListPage implements blob.Bucket. Page tokens are the last key returned.
func (s *Store) ListPage(ctx context.Context, prefix, token string, pageSize int) (blob.Page, error) {
	if pageSize <= 0 {
		pageSize = 1000
	}
	s.mu.Lock()
	s.served++
	defer s.mu.Unlock()
	var keys []string
	for k := range s.objs {
		if strings.HasPrefix(k, prefix) && k > token {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var page blob.Page
	now := s.clock.Now()
	for _, k := range keys {
		o := s.objs[k]
		if o.hiddenUntil > s.served && now.Sub(o.mod) < MaxListLag {
			s.omitted++
			continue
		}
		if len(page.Objects) == pageSize {
			page.Next = page.Objects[len(page.Objects)-1].Key
			break
		}
		page.Objects = append(page.Objects, blob.ObjectInfo{Key: k, Size: int64(len(o.data)), ModTime: o.mod})
	}
	return page, nil
}

// ListDir implements blob.Bucket: one level of the folder prefix, with
// the same omissions as ListPage (a folder shows once a key below it
// does). Page tokens are the last key returned.
func (s *Store) ListDir(ctx context.Context, prefix, token string, pageSize int) (blob.DirPage, error) {
	if prefix != "" && (!strings.HasSuffix(prefix, "/") || blob.CheckKey(prefix+"x") != nil) {
		return blob.DirPage{}, &blob.Error{Op: "list", Key: prefix, Kind: blob.ErrPermanent, Err: errors.New("not a folder's prefix")}
	}
	if pageSize <= 0 {
		pageSize = 1000
	}
	s.mu.Lock()
	s.served++
	defer s.mu.Unlock()
	now := s.clock.Now()
	entries := map[string]*object{} // folders map to nil
	for k, o := range s.objs {
		if !strings.HasPrefix(k, prefix) {
			continue
		}
		if o.hiddenUntil > s.served && now.Sub(o.mod) < MaxListLag {
			s.omitted++
			continue
		}
		if i := strings.IndexByte(k[len(prefix):], '/'); i >= 0 {
			entries[k[:len(prefix)+i+1]] = nil
		} else {
			entries[k] = o
		}
	}
	keys := make([]string, 0, len(entries))
	for k := range entries {
		if k > token {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var page blob.DirPage
	for i, k := range keys {
		if i == pageSize {
			page.Next = keys[i-1]
			break
		}
		if o := entries[k]; o != nil {
			page.Objects = append(page.Objects, blob.ObjectInfo{Key: k, Size: int64(len(o.data)), ModTime: o.mod})
		} else {
			page.Folders = append(page.Folders, k)
		}
	}
	return page, nil
}

// Attributes implements blob.Bucket.
func (s *Store) Attributes(ctx context.Context, key string) (blob.Attributes, error) {
	s.mu.Lock()
	s.served++
	defer s.mu.Unlock()
	o, ok := s.objs[key]
	if !ok {
		return blob.Attributes{}, notFound("attributes", key)
	}
	return blob.Attributes{Size: int64(len(o.data)), ModTime: o.mod}, nil
}

// Close implements blob.Bucket.
func (s *Store) Close() error { return nil }

// Omitted returns how many times a listing left out a just-created key.
func (s *Store) Omitted() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.omitted
}

// Consistent makes later listings complete (for the final checks).
func (s *Store) Consistent() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lag = nil
	for _, o := range s.objs {
		o.hiddenUntil = 0
	}
}

// manifestTrouble reports manifests overwritten by a plain put, and a
// collected version brought back (a ghost) that is the newest version, or,
// once final, any ghost at all. A ghost below the newest can be left by a
// writer that died before taking it away; garbage collection removes it.
func (s *Store) manifestTrouble(final bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.overwrites) > 0 {
		return fmt.Errorf("manifests overwritten by a plain put: %v", s.overwrites)
	}
	newest := ""
	for k := range s.objs {
		// Manifest names count down: the newest sorts first.
		if isManifest(k) && (newest == "" || k < newest) {
			newest = k
		}
	}
	for k, n := range s.created {
		if _, present := s.objs[k]; n > 1 && present && (final || k == newest) {
			return fmt.Errorf("manifest %s was created %d times and is present: a deleted version came back", k, n)
		}
	}
	return nil
}

func isManifest(key string) bool { return strings.HasPrefix(key, "_versions/") }

// randomPart matches the random parts of object names: ULIDs, the
// suffixes of generation and deletion-vector names, and the wall-clock
// time in orphan records' and compaction records' names. The trace leaves them out, so that two runs of a seed
// print the same lines.
var randomPart = regexp.MustCompile(`[0-9A-HJKMNP-TV-Z]{26}|-[0-9a-f]{12}\.parquet|-[0-9a-f]{8}\.bin|orphans/[0-9]{20}-|history/[0-9]{20}-[0-9a-f]{8}\.json`)

// stableName names key the same way in every run of a seed: a random part
// becomes the object's order of creation among the objects named alike
// (or "new" for a key not created yet). Not its order among all objects:
// an operation writes some objects side by side (an upsert's deletion
// vectors of several fragments), in the scheduler's order, but never two
// named alike (one vector per fragment and version).
func (s *Store) stableName(key string) string {
	if !randomPart.MatchString(key) {
		return key
	}
	s.mu.Lock()
	o, ok := s.objs[key]
	s.mu.Unlock()
	tag := "new"
	if ok {
		tag = fmt.Sprintf("#%d", o.kin)
	}
	return randomPart.ReplaceAllString(key, tag)
}
