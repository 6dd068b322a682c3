package testkit

import (
	"sync"
	"time"
)

// Clock is a clock the test moves: hand c.Now to the component under test
// (its Now option) and move time with Advance. Safe for concurrent use.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock is a Clock standing at start.
func NewClock(start time.Time) *Clock { return &Clock{t: start} }

// Now is the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock on by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}
