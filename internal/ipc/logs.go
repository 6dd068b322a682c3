package ipc

import (
	"strings"
	"unicode/utf16"

	"github.com/connecta-dev/connecta/internal/jstext"
)

// LogPrefix retains the first MaxRetainedLogChars UTF-16 code units of log
// entries joined with "\n", and counts the whole. The child fills the done
// frame's prefix with one; the parent keeps one for failures (R5, X4).
// The zero value is ready to use.
type LogPrefix struct {
	b       strings.Builder
	units   int // UTF-16 units retained in b
	total   int // UTF-16 units of the full joined text
	entries int
}

// Add appends one entry.
func (l *LogPrefix) Add(text string) {
	sep := 0
	if l.entries > 0 {
		sep = 1
	}
	l.entries++
	l.total += sep + jstext.Len(text)
	room := MaxRetainedLogChars - l.units
	if room <= 0 {
		return
	}
	if sep == 1 {
		l.b.WriteByte('\n')
		l.units++
		room--
	}
	for _, r := range text {
		n := utf16.RuneLen(r)
		if n < 0 {
			n = 1 // invalid rune → U+FFFD, one unit
		}
		if n > room {
			break // never split a surrogate pair
		}
		l.b.WriteRune(r)
		l.units += n
		room -= n
	}
}

// String is the retained prefix.
func (l *LogPrefix) String() string { return l.b.String() }

// Chars is the full joined length in UTF-16 code units.
func (l *LogPrefix) Chars() int { return l.total }

// Entries is how many entries were added.
func (l *LogPrefix) Entries() int { return l.entries }
