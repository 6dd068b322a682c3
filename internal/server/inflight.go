package server

import (
	"bytes"
	"context"
	"encoding/json"
	"strconv"
	"sync"
)

// CancelResult is how a notifications/cancelled was resolved; the values
// are the labels of connecta_cancellations_total{result}.
type CancelResult string

const (
	// CancelMatched: exactly one in-flight request of the actor had the id;
	// it was cancelled.
	CancelMatched CancelResult = "matched"
	// CancelAmbiguous: several did (clients of one actor number their
	// requests alike); none was cancelled.
	CancelAmbiguous CancelResult = "ambiguous"
	// CancelUnknown: none did (it finished, or never existed).
	CancelUnknown CancelResult = "unknown"
)

// Inflight tracks the requests in flight by (authenticated actor, JSON-RPC
// request id); the actor is its storage key (actor.ID.Key, "<kind>:<id>"). In stateless HTTP a client's notifications/cancelled arrives
// as a POST of its own, and that id is all it names; an id alone is not
// unique (every client counts from 0 or 1), so a cancel applies only when it
// names exactly one request of that actor. A store shared by replicas
// implements it to count across all of them.
type Inflight interface {
	// Register records one request; cancel ends it as a client disconnect
	// would. The returned function removes the record and must be called
	// when the request ends.
	Register(actor, requestID string, cancel context.CancelFunc) (unregister func())
	// Cancel cancels the one request of actor with requestID, if exactly one
	// is in flight, and says what it found.
	Cancel(actor, requestID string) CancelResult
}

// NewMemoryInflight is the Inflight of one process.
func NewMemoryInflight() Inflight { return &memoryInflight{byKey: map[inflightKey][]*inflightEntry{}} }

type inflightKey struct{ actor, id string }

type inflightEntry struct{ cancel context.CancelFunc }

type memoryInflight struct {
	mu    sync.Mutex
	byKey map[inflightKey][]*inflightEntry
}

func (m *memoryInflight) Register(actor, requestID string, cancel context.CancelFunc) func() {
	k, e := inflightKey{actor, requestID}, &inflightEntry{cancel: cancel}
	m.mu.Lock()
	m.byKey[k] = append(m.byKey[k], e)
	m.mu.Unlock()
	return func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		list := m.byKey[k]
		for i, x := range list {
			if x == e {
				list = append(list[:i], list[i+1:]...)
				break
			}
		}
		if len(list) == 0 {
			delete(m.byKey, k)
		} else {
			m.byKey[k] = list
		}
	}
}

func (m *memoryInflight) Cancel(actor, requestID string) CancelResult {
	m.mu.Lock()
	list := m.byKey[inflightKey{actor, requestID}]
	var cancel context.CancelFunc
	result := CancelUnknown
	switch len(list) {
	case 0:
	case 1:
		cancel, result = list[0].cancel, CancelMatched
	default:
		result = CancelAmbiguous
	}
	m.mu.Unlock()
	if cancel != nil {
		cancel() // outside the lock: cancellation runs AfterFuncs
	}
	return result
}

// rpcIDKey canonicalises a JSON-RPC id for matching: a string keeps its
// quotes (so "1" and 1 differ, as JSON-RPC says), a number is written the
// way strconv formats the float it denotes. "" means no usable id.
func rpcIDKey(raw json.RawMessage) string {
	raw = bytes.Trim(raw, " \t\r\n") // JSON whitespace only
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return ""
	}
	switch raw[0] {
	case '"':
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return ""
		}
		return strconv.Quote(s)
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		var n json.Number // JSON's number grammar, which ParseFloat is looser than
		if json.Unmarshal(raw, &n) != nil {
			return ""
		}
		f, err := strconv.ParseFloat(n.String(), 64)
		if err != nil {
			return ""
		}
		return strconv.FormatFloat(f, 'g', -1, 64)
	}
	return ""
}
