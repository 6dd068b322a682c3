package stash

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/connecta-dev/connecta/internal/actor"
	"github.com/connecta-dev/connecta/test/testkit"
)

var laptop = actor.StaticToken("laptop")

// An entry is another actor's: every kind of other actor, even one whose
// display form or id equals the owner's, gets exactly the unknown-id error.
func TestEntryIsUnknownToEveryOtherActor(t *testing.T) {
	ctx := context.Background()
	m := NewMemory(Options{})
	h, err := m.Put(ctx, laptop, "page")
	if err != nil {
		t.Fatal(err)
	}
	_, never := m.Get(ctx, laptop, "no-such-id", 0, 0)
	for _, other := range []actor.ID{actor.StaticToken("ci"), actor.IssuedToken("laptop"), actor.OIDCSubject("laptop"), actor.LocalUser, actor.StdioClient, {}} {
		_, err := m.Get(ctx, other, h, 0, 0)
		if !errors.Is(err, ErrUnknownHandle) {
			t.Fatalf("%v read laptop's entry: %v", other, err)
		}
		if strings.ReplaceAll(err.Error(), h, "ID") != strings.ReplaceAll(never.Error(), "no-such-id", "ID") {
			t.Fatalf("%v got %q, not the unknown-id answer %q", other, err, never)
		}
	}
	if p, err := m.Get(ctx, laptop, h, 0, 0); err != nil || p.Text != "page" {
		t.Fatalf("owner: %+v, %v", p, err)
	}
}

func newClock() *testkit.Clock { return testkit.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)) }

// readAll pages through handle from offset 0 and returns the concatenation.
func readAll(t *testing.T, s Store, handle string, limit int) (string, int) {
	t.Helper()
	var b strings.Builder
	offset, pages := 0, 0
	for {
		p, err := s.Get(context.Background(), laptop, handle, offset, limit)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		if p.Offset != offset {
			t.Fatalf("page offset %d, asked %d", p.Offset, offset)
		}
		b.WriteString(p.Text)
		if p.NextOffset == nil {
			if offset+len(p.Text) != p.TotalBytes {
				t.Fatalf("last page ends at %d of %d", offset+len(p.Text), p.TotalBytes)
			}
			return b.String(), pages
		}
		if *p.NextOffset <= offset {
			t.Fatalf("no progress at %d", offset)
		}
		offset = *p.NextOffset
	}
}

func TestGetResult_PagesReproduceTextByteForByte(t *testing.T) {
	m := NewMemory(Options{})
	text := strings.Repeat("aé😀中", 1000)
	h, err := m.Put(context.Background(), laptop, text)
	if err != nil {
		t.Fatal(err)
	}
	for _, limit := range []int{1, 2, 3, 5, 7, 100, 4096, len(text), len(text) + 10} {
		got, _ := readAll(t, m, h, limit)
		if got != text {
			t.Fatalf("limit %d: pages do not reproduce the text", limit)
		}
	}
}

func TestGetResult_UTF8Alignment(t *testing.T) {
	m := NewMemory(Options{})
	text := "a😀b" // a at 0, 😀 at 1..4, b at 5
	h, _ := m.Put(context.Background(), laptop, text)
	ctx := context.Background()
	cases := []struct {
		offset, limit int
		wantOffset    int
		wantText      string
		wantNext      int // -1 for none
	}{
		{0, 1, 0, "a", 1},
		{0, 2, 0, "a", 1},     // end falls inside 😀: moved back
		{1, 1, 1, "😀", 5},     // empty page: extended past the character
		{2, 1, 1, "😀", 5},     // offset inside 😀: moved back to its start
		{3, 10, 1, "😀b", -1},  // to the end
		{5, 1, 5, "b", -1},    // last byte
		{6, 1, 6, "", -1},     // at the end
		{100, 1, 100, "", -1}, // past the end
		{0, 0, 0, "a😀b", -1},  // limit 0 = default page size
	}
	for _, tc := range cases {
		p, err := m.Get(ctx, laptop, h, tc.offset, tc.limit)
		if err != nil {
			t.Fatal(err)
		}
		next := -1
		if p.NextOffset != nil {
			next = *p.NextOffset
		}
		if p.Offset != tc.wantOffset || p.Text != tc.wantText || next != tc.wantNext || p.TotalBytes != 6 {
			t.Errorf("Get(%d,%d) = {off %d, %q, next %d, total %d}; want {off %d, %q, next %d}",
				tc.offset, tc.limit, p.Offset, p.Text, next, p.TotalBytes, tc.wantOffset, tc.wantText, tc.wantNext)
		}
	}
}

func TestGetResult_TypedErrors(t *testing.T) {
	c := newClock()
	m := NewMemory(Options{TTL: time.Minute, Now: c.Now})
	ctx := context.Background()
	h, _ := m.Put(ctx, laptop, "data")

	_, err := m.Get(ctx, laptop, "nope", 0, 10)
	var he *HandleError
	if !errors.As(err, &he) || !errors.Is(err, ErrUnknownHandle) {
		t.Fatalf("unknown handle: %v", err)
	}
	if err.Error() != `Unknown or expired result id "nope"` {
		t.Fatalf("message %q", err.Error())
	}
	_, err = m.Get(ctx, laptop, strings.Repeat("x", 10_000), 0, 10)
	if len(err.Error()) > 200 {
		t.Fatalf("hostile handle not clamped in the message: %d bytes", len(err.Error()))
	}

	var re *RangeError
	if _, err := m.Get(ctx, laptop, h, -1, 10); !errors.As(err, &re) || re.Field != "offset" {
		t.Fatalf("negative offset: %v", err)
	}
	if _, err := m.Get(ctx, laptop, h, 0, -1); !errors.As(err, &re) || re.Field != "maxBytes" {
		t.Fatalf("negative limit: %v", err)
	}

	c.Advance(time.Minute)
	if _, err := m.Get(ctx, laptop, h, 0, 10); !errors.Is(err, ErrExpiredHandle) {
		t.Fatalf("expired handle: %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := m.Put(cctx, laptop, "x"); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled put: %v", err)
	}
}

func TestGetResult_TTLBeforeExpiry(t *testing.T) {
	c := newClock()
	m := NewMemory(Options{TTL: time.Minute, Now: c.Now})
	h, _ := m.Put(context.Background(), laptop, "data")
	c.Advance(time.Minute - time.Nanosecond)
	if _, err := m.Get(context.Background(), laptop, h, 0, 10); err != nil {
		t.Fatalf("entry gone before its TTL: %v", err)
	}
	c.Advance(time.Nanosecond)
	if _, err := m.Get(context.Background(), laptop, h, 0, 10); !errors.Is(err, ErrExpiredHandle) {
		t.Fatalf("entry alive at its TTL: %v", err)
	}
}

// TestGetResult_WindowedPagesEqualWholeTextPages: a page is cut from a
// window of the stored bytes, never the whole text; every offset and limit
// gives the page PageOf cuts from the whole text, invalid bytes included.
func TestGetResult_WindowedPagesEqualWholeTextPages(t *testing.T) {
	m := NewMemory(Options{})
	text := "aé😀中\xff\xfe" + strings.Repeat("x😀", 5) + "\xe4\xb8" + "end中"
	h, err := m.Put(context.Background(), laptop, text)
	if err != nil {
		t.Fatal(err)
	}
	for offset := 0; offset <= len(text)+2; offset++ {
		for _, limit := range []int{1, 2, 3, 4, 5, 9, len(text)} {
			got, err := m.Get(context.Background(), laptop, h, offset, limit)
			if err != nil {
				t.Fatal(err)
			}
			want := PageOf(text, offset, limit)
			if got.Text != want.Text || got.Offset != want.Offset || got.TotalBytes != want.TotalBytes ||
				(got.NextOffset == nil) != (want.NextOffset == nil) || (got.NextOffset != nil && *got.NextOffset != *want.NextOffset) {
				t.Fatalf("offset %d limit %d: got %+v, want %+v", offset, limit, got, want)
			}
		}
	}
}

func TestGetResult_BoundedByBytesEvictsOldest(t *testing.T) {
	m := NewMemory(Options{MaxBytes: 10})
	ctx := context.Background()
	h1, _ := m.Put(ctx, laptop, "aaaa")
	h2, _ := m.Put(ctx, laptop, "bbbb")
	h3, _ := m.Put(ctx, laptop, "cccc") // evicts h1
	if _, err := m.Get(ctx, laptop, h1, 0, 0); !errors.Is(err, ErrUnknownHandle) {
		t.Fatalf("oldest not evicted: %v", err)
	}
	for _, h := range []string{h2, h3} {
		if _, err := m.Get(ctx, laptop, h, 0, 0); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := m.Put(ctx, laptop, strings.Repeat("z", 11)); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("oversized put: %v", err)
	}
	if _, err := m.Put(ctx, laptop, strings.Repeat("z", 10)); err != nil {
		t.Fatal(err)
	}
	for _, h := range []string{h2, h3} {
		if _, err := m.Get(ctx, laptop, h, 0, 0); !errors.Is(err, ErrUnknownHandle) {
			t.Fatalf("a full-size put evicts everything else: %v", err)
		}
	}
}

func TestGetResult_HandlesAreUnguessable(t *testing.T) {
	m := NewMemory(Options{})
	uuid := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	seen := map[string]bool{}
	for i := 0; i < 1000; i++ {
		h, err := m.Put(context.Background(), laptop, "x")
		if err != nil {
			t.Fatal(err)
		}
		if !uuid.MatchString(h) || seen[h] {
			t.Fatalf("handle %q", h)
		}
		seen[h] = true
	}
}

func TestGetResult_Concurrent(t *testing.T) {
	m := NewMemory(Options{MaxBytes: 1 << 12})
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				data := fmt.Sprintf("%d-%d-%s", g, i, strings.Repeat("é", i%50))
				h, err := m.Put(context.Background(), laptop, data)
				if err != nil {
					t.Error(err)
					return
				}
				p, err := m.Get(context.Background(), laptop, h, 0, len(data))
				if err == nil && p.Text != data {
					t.Errorf("got %q want %q", p.Text, data)
				} else if err != nil && !errors.Is(err, ErrUnknownHandle) {
					t.Error(err)
				}
			}
		}(g)
	}
	wg.Wait()
}

func FuzzPageOf(f *testing.F) {
	f.Add("a😀b", 2, 1)
	f.Add("\xff\x80\x80\x80\x80\x80é", 1, 1)
	f.Add(strings.Repeat("中", 20), 7, 5)
	f.Fuzz(func(t *testing.T, data string, offset, limit int) {
		if offset < 0 || limit <= 0 || offset > len(data)+8 {
			return
		}
		// A page never exceeds its limit except to make progress past one
		// character, stays inside the text, and is valid when the text is.
		p := PageOf(data, offset, limit)
		if p.TotalBytes != len(data) {
			t.Fatal("total")
		}
		if offset >= len(data) {
			if p.Text != "" || p.NextOffset != nil {
				t.Fatal("past-the-end page not empty")
			}
			return
		}
		if p.Offset > offset || p.Offset < offset-3 || p.Text != data[p.Offset:p.Offset+len(p.Text)] {
			t.Fatalf("page misplaced: %+v", p)
		}
		if len(p.Text) == 0 || len(p.Text) > max(limit, utf8.UTFMax) {
			t.Fatalf("page length %d for limit %d", len(p.Text), limit)
		}
		if utf8.ValidString(data) && !utf8.ValidString(p.Text) {
			t.Fatalf("split a character: %q", p.Text)
		}
		// Walking from 0 reproduces the text exactly.
		var b strings.Builder
		off := 0
		for steps := 0; ; steps++ {
			q := PageOf(data, off, limit)
			if q.Offset != off {
				t.Fatalf("walk: page at %d reports %d", off, q.Offset)
			}
			b.WriteString(q.Text)
			if q.NextOffset == nil {
				break
			}
			if *q.NextOffset <= off || steps > len(data) {
				t.Fatal("walk makes no progress")
			}
			off = *q.NextOffset
		}
		if b.String() != data {
			t.Fatal("walk does not reproduce the text")
		}
	})
}

func BenchmarkPageOf(b *testing.B) {
	data := strings.Repeat("aé😀中", 50_000)
	for b.Loop() {
		for off := 0; off < len(data); off += 50_000 {
			_ = PageOf(data, off, 50_000)
		}
	}
}
