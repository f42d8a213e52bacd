package worker

import (
	"slices"
	"sync"

	"github.com/nephele-dev/nephele/cloud"
)

// priorityFIFO is a client-go workqueue.Queue that hands out critical keys before the
// others, first come first served within each priority. While keys of both priorities
// are queued, one pop in cloud.RefineEvery takes the oldest refining key, so a
// steady stream of critical work cannot starve the rest: the share the cloud budget's
// classes keep. client-go's queue keeps its guarantees (a key is synced by one worker
// at a time, added keys are deduplicated, delays and rate limits); this only chooses
// the order. The workqueue calls Touch, Push, Len and Pop under its own lock; mark and
// the bookkeeping of what was popped come from workers and event handlers, hence mu.
type priorityFIFO struct {
	mu sync.Mutex
	// marked are the keys to queue as critical when they are next pushed or touched.
	marked map[string]bool
	// popped are the keys handed out as critical and not finished yet.
	popped   map[string]bool
	critical []string
	refine   []string
	// streak counts critical pops in a row while refining keys waited.
	streak int
}

func newPriorityFIFO() *priorityFIFO {
	return &priorityFIFO{marked: map[string]bool{}, popped: map[string]bool{}}
}

// mark makes key critical when the workqueue next pushes or touches it; the caller adds
// key to the workqueue right after. It returns whether key was marked already.
func (q *priorityFIFO) mark(key string) (was bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	was = q.marked[key]
	q.marked[key] = true
	return was
}

// unmark takes back a mark that was not followed by an add.
func (q *priorityFIFO) unmark(key string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.marked, key)
}

// finish forgets that key was popped as critical and returns whether it was, so that a
// retry can be marked again.
func (q *priorityFIFO) finish(key string) (critical bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	critical = q.popped[key]
	delete(q.popped, key)
	return critical
}

// Touch moves a queued key that was marked since it was pushed to the critical queue.
func (q *priorityFIFO) Touch(key string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.marked[key] {
		return
	}
	if i := slices.Index(q.refine, key); i >= 0 {
		q.refine = slices.Delete(q.refine, i, i+1)
		q.critical = append(q.critical, key)
	}
}

// Push queues a key that is not queued.
func (q *priorityFIFO) Push(key string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.marked[key] {
		q.critical = append(q.critical, key)
		return
	}
	q.refine = append(q.refine, key)
}

// Len returns how many keys are queued.
func (q *priorityFIFO) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.critical) + len(q.refine)
}

// Pop takes the next key: the oldest critical one, but for every RefineEvery-th pop
// while refining keys wait, which takes the oldest of those. A key that was marked,
// whichever list it waited in, was popped as critical. The workqueue pops only when
// Len is positive.
func (q *priorityFIFO) Pop() string {
	q.mu.Lock()
	defer q.mu.Unlock()
	var key string
	if len(q.critical) > 0 && (len(q.refine) == 0 || q.streak < cloud.RefineEvery-1) {
		key = pop(&q.critical)
		if len(q.refine) > 0 {
			q.streak++
		}
	} else {
		key = pop(&q.refine)
		q.streak = 0
	}
	if q.marked[key] {
		q.popped[key] = true
		delete(q.marked, key)
	}
	return key
}

// pop takes the first key of list, clearing its slot so the backing array does not
// keep it.
func pop(list *[]string) string {
	key := (*list)[0]
	(*list)[0] = ""
	*list = (*list)[1:]
	return key
}
