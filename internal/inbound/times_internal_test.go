package inbound

import (
	"math"
	"testing"
	"time"
)

// Time claims beyond int64 seconds are refused, not wrapped into the past:
// an nbf of 1e300 was accepted (int64(1e300) came out as the far past), an
// exp of 1e300 read as expired.
func TestCheckTimes_OutOfRangeRefused(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	f := func(v float64) *float64 { return &v }
	exp := f(float64(now.Add(time.Hour).Unix()))
	ok := claims{Expiry: exp, NotBefore: f(float64(now.Unix())), IssuedAt: f(float64(now.Unix()))}
	if rej := ok.checkTimes(now, time.Minute); rej != nil {
		t.Fatalf("a valid token: %v", rej)
	}
	for _, c := range []claims{
		{Expiry: exp, NotBefore: f(1e300)},
		{Expiry: exp, NotBefore: f(-1e300)},
		{Expiry: exp, IssuedAt: f(1e300)},
		{Expiry: f(1e300)},
		{Expiry: f(math.MaxInt64)},
		{Expiry: exp, NotBefore: f(9.3e18)},
	} {
		rej := c.checkTimes(now, time.Minute)
		if rej == nil || rej.Reason != ReasonInvalidToken {
			t.Errorf("%+v: %v, want %s", c, rej, ReasonInvalidToken)
		}
	}
	// Within range, the far future is still only not yet valid.
	if rej := (claims{Expiry: exp, NotBefore: f(maxUnixSeconds)}).checkTimes(now, time.Minute); rej == nil || rej.Reason != ReasonNotYetValid {
		t.Errorf("nbf in year 9999: %v", rej)
	}
}
