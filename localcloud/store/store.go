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
// rather than misread.
const schemaVersion = 1

var (
	bucketMeta          = []byte("meta")
	bucketInstances     = []byte("instances")
	bucketInstanceNames = []byte("instance-names")
	bucketLBs           = []byte("loadbalancers")
	bucketVIPs          = []byte("vips")
	bucketRoutes        = []byte("routes")
	keySchema           = []byte("schema")
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
		for _, b := range [][]byte{bucketMeta, bucketInstances, bucketInstanceNames, bucketLBs, bucketVIPs, bucketRoutes} {
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
		if err != nil || n > schemaVersion {
			return fmt.Errorf("schema version %q: this localcloud understands version %d or older", v, schemaVersion)
		}
		return nil
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
