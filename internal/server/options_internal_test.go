package server

import (
	"strings"
	"testing"
	"time"
)

// TestCheckRequests_RefusesZeroLimits: the request limits come from config
// through app.New; a zero is refused with the option and key named, and a
// negative queue still means fail fast.
func TestCheckRequests_RefusesZeroLimits(t *testing.T) {
	_, err := checkRequests(RequestLimits{}, true, "MaxInlineBytes (results.maxInlineBytes)")
	if err == nil {
		t.Fatal("zero limits accepted")
	}
	for _, want := range []string{"Requests.MaxActive (requests.maxActive)", "Requests.QueueTimeout", "Requests.RetryAfter", "Requests.MaxBodyBytes", "Requests.BodyTimeout", "HostCallTimeout (execute.hostCallTimeoutMs)", "MaxInlineBytes (results.maxInlineBytes)"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
	ok := RequestLimits{MaxActive: 1, MaxQueue: -1, QueueTimeout: time.Second, RetryAfter: time.Second, MaxBodyBytes: 1, BodyTimeout: time.Second}
	got, err := checkRequests(ok, false)
	if err != nil || got.MaxQueue != 0 {
		t.Fatalf("checkRequests(%+v) = %+v, %v; want MaxQueue 0, nil", ok, got, err)
	}
}
