package cores

import "time"

// WithClock sets the Pacer's clock.
func (p *Pacer) WithClock(now func() time.Time) *Pacer { p.now = now; return p }

const CheckEvery = checkEvery
