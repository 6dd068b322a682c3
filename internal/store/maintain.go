package store

import (
	"context"
	"log/slog"
	"time"
)

// Maintenance defaults: one bounded job per process, not a timer per row.
const (
	DefaultMaintainEvery = 30 * time.Second
	DefaultSweepLimit    = 1000
	// probeEvery is how often a failed store is probed so that /health and
	// the calls that need it recover by themselves when it returns.
	probeEvery = 2 * time.Second
)

// MaintainOptions configure Maintain.
type MaintainOptions struct {
	Every      time.Duration // between sweeps; 0 = DefaultMaintainEvery
	SweepLimit int           // rows deleted per sweep at most; 0 = DefaultSweepLimit
	MaxEvents  int           // activity retention by count; 0 = none
	MaxAge     time.Duration // activity retention by age; 0 = none
	Logger     *slog.Logger
	Now        func() time.Time
}

// Maintain runs until ctx ends: every Every it deletes at most SweepLimit
// expired stash rows (and OAuth flows) and applies the activity retention;
// while the store is failed it probes it every couple of seconds. Several
// replicas may run it on one database: each step is bounded and idempotent.
func Maintain(ctx context.Context, st Store, o MaintainOptions) {
	if o.Every <= 0 {
		o.Every = DefaultMaintainEvery
	}
	if o.SweepLimit <= 0 {
		o.SweepLimit = DefaultSweepLimit
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	tick := time.NewTicker(min(probeEvery, o.Every))
	defer tick.Stop()
	last := time.Time{}
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if st.Health().State != StateOK {
			_ = st.Ping(ctx) // success flips the state back to ok
			continue
		}
		if time.Since(last) < o.Every {
			continue
		}
		last = time.Now()
		MaintainOnce(ctx, st, o)
	}
}

// MaintainOnce runs one sweep and one retention pass.
func MaintainOnce(ctx context.Context, st Store, o MaintainOptions) {
	if o.SweepLimit <= 0 {
		o.SweepLimit = DefaultSweepLimit
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	now := o.Now()
	if n, err := st.SweepResults(ctx, now, o.SweepLimit); err != nil {
		o.Logger.Warn("store sweep failed", "error", err.Error())
	} else if n > 0 {
		o.Logger.Debug("store sweep", "results", n)
	}
	if n, err := sweepCallBudgets(ctx, st, o.SweepLimit); err != nil {
		o.Logger.Warn("call budget sweep failed", "error", err.Error())
	} else if n > 0 {
		o.Logger.Debug("store sweep", "callBudgets", n)
	}
	var olderThan time.Time
	if o.MaxAge > 0 {
		olderThan = now.Add(-o.MaxAge)
	}
	if o.MaxEvents > 0 || !olderThan.IsZero() {
		if n, err := st.PruneActivity(ctx, o.MaxEvents, olderThan); err != nil {
			o.Logger.Warn("activity retention failed", "error", err.Error())
		} else if n > 0 {
			o.Logger.Debug("activity retention", "deleted", n)
		}
	}
}
