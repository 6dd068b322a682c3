package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/stdlib"
)

// Cancellation results (the values of server.CancelResult).
const (
	CancelMatched   = "matched"
	CancelAmbiguous = "ambiguous"
	CancelUnknown   = "unknown"
)

// Cross-replica in-flight registry timing.
const (
	inflightFlushEvery = 50 * time.Millisecond
	heartbeatEvery     = 5 * time.Second
	// replicaTimeout: a replica not seen for this long is gone (crashed);
	// its rows stop counting and are deleted.
	replicaTimeout  = 30 * time.Second
	cancelChannel   = "connecta_cancel"
	cancelFlushWait = time.Second
)

// ErrNotShared: the store is not PostgreSQL, so requests in flight stay
// this process's own.
var ErrNotShared = errors.New("in-flight requests are shared only through PostgreSQL")

// Inflight is the registry of requests in flight across every replica on
// one PostgreSQL: each request is a row (written off the request path, in
// batches), a cancel counts the rows of (actor, request id) among live
// replicas, and one that belongs to another replica is signalled to it with
// NOTIFY. When the database fails, it answers from this process alone.
type Inflight struct {
	db      *sql.DB
	replica string
	log     *slog.Logger

	mu      sync.Mutex
	seq     int64
	local   map[int64]*inflightReq
	pending []inflightOp // not yet written

	kick    chan chan struct{}
	stop    context.CancelFunc
	done    sync.WaitGroup
	failing bool
}

type inflightReq struct {
	actor, id string
	cancel    context.CancelFunc
}

type inflightOp struct {
	insert bool
	seq    int64
	actor  string
	id     string
	at     int64
}

// NewInflight starts the registry of st (PostgreSQL only: ErrNotShared
// otherwise): its writer, heartbeat and LISTEN loop run until Close.
func NewInflight(st Store, log *slog.Logger) (*Inflight, error) {
	s, ok := st.(*sqlStore)
	if !ok || s.d.kind != "postgres" {
		return nil, ErrNotShared
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ctx, stop := context.WithCancel(context.Background())
	f := &Inflight{db: s.db, replica: NewID()[:16], log: log, local: map[int64]*inflightReq{},
		kick: make(chan chan struct{}), stop: stop}
	f.done.Add(3)
	go f.writer(ctx)
	go f.heartbeat(ctx)
	go f.listen(ctx)
	return f, nil
}

// Close stops the loops and removes this replica's rows.
func (f *Inflight) Close() error {
	f.stop()
	f.done.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	_, err1 := f.db.ExecContext(ctx, `DELETE FROM inflight WHERE replica = $1`, f.replica)
	_, err2 := f.db.ExecContext(ctx, `DELETE FROM replicas WHERE id = $1`, f.replica)
	return errors.Join(err1, err2)
}

// Register records one request; the returned function removes it.
func (f *Inflight) Register(actor, requestID string, cancel context.CancelFunc) func() {
	f.mu.Lock()
	f.seq++
	seq := f.seq
	f.local[seq] = &inflightReq{actor: actor, id: requestID, cancel: cancel}
	f.pending = append(f.pending, inflightOp{insert: true, seq: seq, actor: actor, id: requestID, at: time.Now().UnixMilli()})
	f.mu.Unlock()
	return func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		delete(f.local, seq)
		// Not written yet: drop the insert instead of writing both.
		for i, op := range f.pending {
			if op.insert && op.seq == seq {
				f.pending = append(f.pending[:i], f.pending[i+1:]...)
				return
			}
		}
		f.pending = append(f.pending, inflightOp{seq: seq})
	}
}

// Cancel cancels the one request of actor with requestID in flight on any
// replica, if exactly one is, and says what it found.
func (f *Inflight) Cancel(actor, requestID string) string {
	f.flush()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	rows, err := f.db.QueryContext(ctx, `SELECT i.replica, i.seq FROM inflight i JOIN replicas r ON r.id = i.replica
		WHERE i.actor = $1 AND i.request_id = $2 AND r.seen_at_ms > $3 LIMIT 2`,
		actor, requestID, time.Now().Add(-replicaTimeout).UnixMilli())
	if err != nil {
		f.log.Warn("cancellation: the store failed; matching this replica's requests only", "error", err.Error())
		return f.cancelLocal(actor, requestID)
	}
	type hit struct {
		replica string
		seq     int64
	}
	var hits []hit
	for rows.Next() {
		var h hit
		if err := rows.Scan(&h.replica, &h.seq); err != nil {
			_ = rows.Close()
			return f.cancelLocal(actor, requestID)
		}
		hits = append(hits, h)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return f.cancelLocal(actor, requestID)
	}
	switch {
	case len(hits) == 0:
		return CancelUnknown
	case len(hits) > 1:
		return CancelAmbiguous
	case hits[0].replica == f.replica:
		f.cancelSeq(hits[0].seq)
		return CancelMatched
	}
	if _, err := f.db.ExecContext(ctx, `SELECT pg_notify($1, $2)`, cancelChannel,
		hits[0].replica+"\t"+strconv.FormatInt(hits[0].seq, 10)); err != nil {
		f.log.Warn("cancellation: could not signal the replica that runs the request", "error", err.Error())
		return CancelUnknown
	}
	return CancelMatched
}

func (f *Inflight) cancelSeq(seq int64) {
	f.mu.Lock()
	r := f.local[seq]
	f.mu.Unlock()
	if r != nil {
		r.cancel()
	}
}

// cancelLocal is the one-process rule, for when the database is down.
func (f *Inflight) cancelLocal(actor, requestID string) string {
	f.mu.Lock()
	var found []*inflightReq
	for _, r := range f.local {
		if r.actor == actor && r.id == requestID {
			found = append(found, r)
		}
	}
	f.mu.Unlock()
	switch len(found) {
	case 0:
		return CancelUnknown
	case 1:
		found[0].cancel()
		return CancelMatched
	}
	return CancelAmbiguous
}

// flush waits (briefly) until this replica's pending rows are written.
func (f *Inflight) flush() {
	reply := make(chan struct{})
	t := time.NewTimer(cancelFlushWait)
	defer t.Stop()
	select {
	case f.kick <- reply:
	case <-t.C:
		return
	}
	select {
	case <-reply:
	case <-t.C:
	}
}

func (f *Inflight) writer(ctx context.Context) {
	defer f.done.Done()
	tick := time.NewTicker(inflightFlushEvery)
	defer tick.Stop()
	for {
		var reply chan struct{}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case reply = <-f.kick:
		}
		f.write(ctx)
		if reply != nil {
			close(reply)
		}
	}
}

// write applies the pending inserts and deletes in one transaction; on
// failure they are dropped (a cancel then falls back to this process).
func (f *Inflight) write(ctx context.Context) {
	f.mu.Lock()
	ops := f.pending
	f.pending = nil
	f.mu.Unlock()
	if len(ops) == 0 {
		return
	}
	wctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	err := func() error {
		tx, err := f.db.BeginTx(wctx, nil)
		if err != nil {
			return err
		}
		defer func() { _ = tx.Rollback() }()
		var ins []string
		var args []any
		for _, op := range ops {
			if op.insert {
				n := len(args)
				ins = append(ins, fmt.Sprintf("($%d, $%d, $%d, $%d, $%d)", n+1, n+2, n+3, n+4, n+5))
				args = append(args, f.replica, op.seq, op.actor, op.id, op.at)
			}
		}
		if len(ins) > 0 {
			if _, err := tx.ExecContext(wctx, `INSERT INTO inflight (replica, seq, actor, request_id, started_at_ms) VALUES `+
				strings.Join(ins, ", ")+` ON CONFLICT DO NOTHING`, args...); err != nil {
				return err
			}
		}
		var dels []int64
		for _, op := range ops {
			if !op.insert {
				dels = append(dels, op.seq)
			}
		}
		if len(dels) > 0 {
			if _, err := tx.ExecContext(wctx, `DELETE FROM inflight WHERE replica = $1 AND seq = ANY($2)`, f.replica, dels); err != nil {
				return err
			}
		}
		return tx.Commit()
	}()
	if err != nil && !f.failing {
		f.log.Warn("in-flight registry: the store failed; cancellations match this replica only until it answers", "error", err.Error())
	}
	f.failing = err != nil
}

// heartbeat keeps this replica alive in `replicas` and deletes the rows of
// replicas that stopped (crashed) long ago.
func (f *Inflight) heartbeat(ctx context.Context) {
	defer f.done.Done()
	beat := func() {
		hctx, cancel := context.WithTimeout(ctx, opTimeout)
		defer cancel()
		now := time.Now().UnixMilli()
		_, _ = f.db.ExecContext(hctx, `INSERT INTO replicas (id, seen_at_ms) VALUES ($1, $2)
			ON CONFLICT (id) DO UPDATE SET seen_at_ms = excluded.seen_at_ms`, f.replica, now)
		gone := now - 2*replicaTimeout.Milliseconds()
		_, _ = f.db.ExecContext(hctx, `DELETE FROM inflight WHERE replica IN (SELECT id FROM replicas WHERE seen_at_ms < $1)`, gone)
		_, _ = f.db.ExecContext(hctx, `DELETE FROM replicas WHERE seen_at_ms < $1`, gone)
	}
	beat()
	tick := time.NewTicker(heartbeatEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			beat()
		}
	}
}

// listen receives the cancels other replicas signal to this one, on a
// dedicated connection, reconnecting after a failure.
func (f *Inflight) listen(ctx context.Context) {
	defer f.done.Done()
	wait := pgRetryFirst
	for ctx.Err() == nil {
		err := f.listenOnce(ctx)
		if ctx.Err() != nil {
			return
		}
		f.log.Debug("in-flight registry: LISTEN connection lost; reconnecting", "error", fmt.Sprint(err))
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(wait*2, pgRetryMax)
	}
}

func (f *Inflight) listenOnce(ctx context.Context) error {
	conn, err := f.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	return conn.Raw(func(dc any) error {
		sc, ok := dc.(*stdlib.Conn)
		if !ok {
			return errors.New("not a pgx connection")
		}
		pc := sc.Conn()
		if _, err := pc.Exec(ctx, "LISTEN "+cancelChannel); err != nil {
			return err
		}
		for {
			n, err := pc.WaitForNotification(ctx)
			if err != nil {
				return err
			}
			replica, seqText, ok := strings.Cut(n.Payload, "\t")
			if !ok || replica != f.replica {
				continue
			}
			if seq, err := strconv.ParseInt(seqText, 10, 64); err == nil {
				f.cancelSeq(seq)
			}
		}
	})
}
