package poll_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nephele-dev/nephele/internal/testkit/poll"
)

// Until is the wait under Eventually, for a caller with a context rather than a test;
// the condition's last answer is what a timeout reports.
func ExampleUntil() {
	err := poll.Until(context.Background(), 30*time.Millisecond, func(context.Context) error {
		return errors.New("the lease is held by replica-a")
	})
	var te *poll.TimeoutError
	fmt.Println(errors.As(err, &te), te.Last)
	// Output: true the lease is held by replica-a
}
