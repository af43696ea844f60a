package explain

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestTurns: one question is computed at a time; up to the backlog wait their turn, in the order
// they asked; one beyond the backlog, or one that waited past the wait, is a BusyError; one whose
// caller went away is its context's error.
func TestTurns(t *testing.T) {
	tr := newTurns(ServeOptions{Backlog: 2, BacklogWait: time.Minute})
	done, err := tr.take(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	order := make(chan int, 2)
	for i := range 2 {
		go func() {
			d, err := tr.take(context.Background())
			if err != nil {
				t.Errorf("waiter %d: %v", i, err)
				order <- -1
				return
			}
			order <- i
			d()
		}()
		for tr.waiting.Load() != int64(i+1) { // the waiter is queued before the next asks
			time.Sleep(time.Millisecond)
		}
	}
	var busy *BusyError
	beyond, stop := context.WithTimeout(context.Background(), 10*time.Second) // ends a failing build's wait
	defer stop()
	if _, err := tr.take(beyond); !errors.As(err, &busy) || busy.RetryAfter <= 0 {
		t.Errorf("beyond the backlog: %v, want a BusyError with a RetryAfter", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := tr.take(ctx); err == nil {
		t.Error("a caller gone while the turn is held: no error")
	}
	done()
	if a, b := <-order, <-order; a != 0 || b != 1 {
		t.Errorf("the waiters took their turns in the order %d, %d; want 0, 1", a, b)
	}

	short := newTurns(ServeOptions{BacklogWait: time.Millisecond})
	done, _ = short.take(context.Background())
	defer done()
	if _, err := short.take(context.Background()); !errors.As(err, &busy) {
		t.Errorf("a wait past BacklogWait: %v, want a BusyError", err)
	}
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := short.take(gone); !errors.Is(err, context.Canceled) {
		t.Errorf("a caller gone while waiting: %v, want context.Canceled", err)
	}
}
