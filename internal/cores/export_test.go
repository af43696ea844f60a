package cores

// Waiting is how many holders wait for a seat.
func (s *Seats) Waiting() int64 { return s.waiting.Load() }
