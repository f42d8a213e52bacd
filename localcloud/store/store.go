package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
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
	// ErrLimit means a request would go past a limit of the cloud (an instance's
	// volume attach limit).
	ErrLimit = errors.New("limit reached")
)

// schemaVersion is written into new files; a file with a newer version is refused
// rather than misread, and an older one is migrated when opened (see migrations).
// Version 2 added the route destination index, version 3 the volumes.
const schemaVersion = 3

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
	bucketVolumes    = []byte("volumes")
	// bucketVolumeNames maps a volume's name to its ID: names are unique.
	bucketVolumeNames = []byte("volume-names")
	keySchema         = []byte("schema")
)

// Store is the local cloud's state file. It is safe for concurrent use.
type Store struct {
	db *bolt.DB
}

// Open opens (creating if needed) the state file at path. It fails after a few seconds
// if another process holds the file, and with a *CorruptError when the file is not one
// it can read (bbolt would panic on some of those, at open or at the first read).
func Open(path string) (*Store, error) {
	// The file bbolt opens, so that a panic inside bolt.Open, which returns no DB to
	// close, still closes it and so releases its lock.
	var file *os.File
	opts := &bolt.Options{Timeout: 3 * time.Second, OpenFile: func(name string, flag int, mode os.FileMode) (*os.File, error) {
		f, err := os.OpenFile(name, flag, mode)
		file = f
		return f, err
	}}
	var db *bolt.DB
	err := guard(func() (err error) {
		db, err = bolt.Open(path, 0o600, opts)
		return err
	})
	var panicked *panicError
	switch {
	case errors.As(err, &panicked):
		// bbolt mapped the file before it panicked, and the mapping, which cannot be
		// undone without the DB, keeps the file open: unlock it explicitly, so that the
		// file is not held until the process exits. The read-only mapping stays.
		if file != nil {
			_ = syscall.Flock(int(file.Fd()), syscall.LOCK_UN)
			_ = file.Close()
		}
		return nil, &CorruptError{Path: path, Err: err}
	case errors.Is(err, bolterrors.ErrInvalid), errors.Is(err, bolterrors.ErrChecksum), errors.Is(err, bolterrors.ErrVersionMismatch):
		return nil, &CorruptError{Path: path, Err: err}
	case err != nil:
		return nil, fmt.Errorf("opening state file %s: %w", path, err)
	}
	if err := guard(func() error { return initialize(db) }); err != nil {
		_ = db.Close()
		var corrupt *corruptFileError
		if errors.As(err, &panicked) || errors.As(err, &corrupt) {
			return nil, &CorruptError{Path: path, Err: err}
		}
		return nil, fmt.Errorf("initializing state file %s: %w", path, err)
	}
	return &Store{db: db}, nil
}

// initialize checks that no page lies past the end of the file (a truncated file), then
// creates the buckets and brings the schema to schemaVersion, in one transaction.
func initialize(db *bolt.DB) error {
	info, err := os.Stat(db.Path())
	if err != nil {
		return err
	}
	// Every page is read once, here, under guard: a page bbolt cannot decode is found
	// now rather than by a panic in the middle of a request later.
	err = db.View(func(tx *bolt.Tx) error {
		if info.Size() < tx.Size() {
			return &corruptFileError{fmt.Sprintf("the file has %d bytes but its pages reach to byte %d: it was cut short", info.Size(), tx.Size())}
		}
		return tx.ForEach(func(_ []byte, b *bolt.Bucket) error { return readAll(b) })
	})
	if err != nil {
		return err
	}
	return db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketMeta, bucketInstances, bucketInstanceNames, bucketLBs, bucketVIPs, bucketRoutes, bucketRouteDests, bucketVolumes, bucketVolumeNames} {
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

// readAll reads every key of b and of the buckets in it.
func readAll(b *bolt.Bucket) error {
	return b.ForEach(func(k, v []byte) error {
		if v == nil {
			if child := b.Bucket(k); child != nil {
				return readAll(child)
			}
		}
		return nil
	})
}

// migrate brings a file from schema version from to from+1, inside Open's transaction.
func migrate(tx *bolt.Tx, from int) error {
	switch from {
	case 1:
		return indexRouteDestinations(tx)
	case 2:
		// The volume buckets were created with the others: nothing to convert.
		return nil
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
