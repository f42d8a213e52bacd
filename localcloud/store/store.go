package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Errors the store returns, wrapped with the object they concern.
var (
	// ErrNotFound means the object does not exist.
	ErrNotFound = errors.New("not found")
	// ErrAlreadyExists means an object with that name exists.
	ErrAlreadyExists = errors.New("already exists")
	// ErrConflict means the request contradicts the stored state.
	ErrConflict = errors.New("conflict")
	// ErrExhausted means an address range has no free address left.
	ErrExhausted = errors.New("exhausted")
)

// schemaVersion is written into new files; a file with a newer version is refused
// rather than misread, and an older one is migrated when opened (see migrations).
// Version 2 added the route destination index.
const schemaVersion = 2

var (
	bucketMeta          = []byte("meta")
	bucketInstances     = []byte("instances")
	bucketInstanceNames = []byte("instance-names")
	bucketLBs           = []byte("loadbalancers")
	bucketVIPs          = []byte("vips")
	bucketRoutes        = []byte("routes")
	// bucketRouteDests holds, per cluster, a bucket from a route's destination CIDR to
	// its name: a new route's conflict check is one lookup, not a scan of the table.
	bucketRouteDests = []byte("route-destinations")
	keySchema        = []byte("schema")
)

// Store is the local cloud's state file. It is safe for concurrent use.
type Store struct {
	db *bolt.DB
}

// Open opens (creating if needed) the state file at path. It fails after a few seconds
// if another process holds the file.
func Open(path string) (*Store, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 3 * time.Second})
	if err != nil {
		return nil, fmt.Errorf("opening state file %s: %w", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketMeta, bucketInstances, bucketInstanceNames, bucketLBs, bucketVIPs, bucketRoutes, bucketRouteDests} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return fmt.Errorf("creating bucket %s: %w", b, err)
			}
		}
		meta := tx.Bucket(bucketMeta)
		v := meta.Get(keySchema)
		if v == nil {
			return meta.Put(keySchema, []byte(strconv.Itoa(schemaVersion)))
		}
		n, err := strconv.Atoi(string(v))
		if err != nil || n > schemaVersion || n < 1 {
			return fmt.Errorf("schema version %q: this localcloud understands versions 1 to %d", v, schemaVersion)
		}
		// Migrate an older file in the same transaction: it is either fully migrated or
		// left as it was.
		for ; n < schemaVersion; n++ {
			if err := migrate(tx, n); err != nil {
				return fmt.Errorf("migrating from schema version %d to %d: %w", n, n+1, err)
			}
		}
		return meta.Put(keySchema, []byte(strconv.Itoa(schemaVersion)))
	})
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("initializing state file %s: %w", path, err)
	}
	return &Store{db: db}, nil
}

// Close flushes and closes the state file.
func (s *Store) Close() error {
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("closing state file: %w", err)
	}
	return nil
}

// Path returns the state file's path.
func (s *Store) Path() string { return s.db.Path() }

func (s *Store) view(ctx context.Context, fn func(*bolt.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.db.View(fn)
}

func (s *Store) update(ctx context.Context, fn func(*bolt.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.db.Update(fn)
}

// batch is update for the writes many clients make at once (load balancer and route
// changes): bbolt joins the calls that arrive together into one transaction, so they
// share one write to disk (fsync) instead of queueing for one each. fn may run more
// than once (bbolt runs a batch again without a call that failed), so it must set its
// results afresh on every run and have no effect outside tx.
func (s *Store) batch(ctx context.Context, fn func(*bolt.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.db.Batch(fn)
}

// migrate brings a file from schema version from to from+1, inside Open's transaction.
func migrate(tx *bolt.Tx, from int) error {
	switch from {
	case 1:
		return indexRouteDestinations(tx)
	default:
		return fmt.Errorf("no migration from schema version %d", from)
	}
}

func getJSON(b *bolt.Bucket, key []byte, v any) (bool, error) {
	raw := b.Get(key)
	if raw == nil {
		return false, nil
	}
	if err := jsonUnmarshal(key, raw, v); err != nil {
		return false, err
	}
	return true, nil
}

func jsonUnmarshal(key, raw []byte, v any) error {
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("decoding stored %s: %w", key, err)
	}
	return nil
}

func putJSON(b *bolt.Bucket, key []byte, v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encoding %s: %w", key, err)
	}
	return b.Put(key, raw)
}
