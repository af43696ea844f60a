package cores

import (
	"context"
	"time"
)

// Held is Holding.
func Held(ctx context.Context) bool { return Holding(ctx) }

// Waiting is how many holders wait for a seat.
func (s *Seats) Waiting() int64 { return s.waiting.Load() }

// WithClock sets the Pacer's clock.
func (p *Pacer) WithClock(now func() time.Time) *Pacer { p.now = now; return p }

const CheckEvery = checkEvery
