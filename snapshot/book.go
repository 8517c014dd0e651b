package snapshot

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// MaxDepth is the most levels per side a book response carries, and the depth
// served when a request names none.
const MaxDepth = 100

// Book is one pair's order book, pre-serialized at MaxDepth. A smaller depth
// is served as three slices of the same bytes (see Parts). A Book is never
// mutated after Store publishes it.
type Book struct {
	tickerID string
	time     int64 // the venue's clock for this book, ms
	readAt   int64 // the service's clock when it was read, Unix ns
	version  uint64
	// seq is the venue's update id the levels are current at (Binance u),
	// 0 when unknown: where another process's local book may start from
	// this one and the diff stream's events after it.
	seq int64
	// open says which sides may continue at the venue beyond the levels
	// they hold (see Open): such a side serves no more levels than it has.
	open Open

	body      []byte
	later     *lazyForms // body's gzip form and tag, once asked for; shared with confirmed copies
	bidEnds   []int32    // bidEnds[i]: end offset of bid level i+1 in body
	askEnds   []int32
	bidsOpen  int32 // just after `"bids":[`
	bidsClose int32 // at the `]` that closes the bids
	asksOpen  int32
	asksClose int32
}

// ErrBadBook reports a book that must not be published.
var ErrBadBook = errors.New("unusable order book")

// NewBook checks and serializes a book read from the venue. At most MaxDepth
// levels per side are kept. Every price and size must be a positive plain
// decimal and each side must be strictly ordered best first (bids falling,
// asks rising); otherwise the read is unusable and nothing of it is published.
func NewBook(tickerID string, venueTime int64, bids, asks []Level, readAt time.Time) (*Book, error) {
	bids = bids[:min(len(bids), MaxDepth)]
	asks = asks[:min(len(asks), MaxDepth)]
	if err := checkSide(bids, 1); err != nil {
		return nil, fmt.Errorf("%w: %s bids: %w", ErrBadBook, tickerID, err)
	}
	if err := checkSide(asks, -1); err != nil {
		return nil, fmt.Errorf("%w: %s asks: %w", ErrBadBook, tickerID, err)
	}
	return NewCheckedBook(tickerID, venueTime, 0, bids, asks, readAt), nil
}

// Open says of each side of a book whether the venue may hold levels beyond
// the last one the side carries. A side read whole from the venue (a REST
// answer of MaxDepth levels, or of fewer when the venue has no more) is
// closed: it is the venue's top MaxDepth, or the venue's whole side. A side
// of a local order book that holds fewer than MaxDepth levels because its
// snapshot ended there (the top moved towards the snapshot's edge) is open:
// it is an exact prefix of the venue's side, good for requests of no more
// levels than it holds, and a request for more must wait for a deeper read
// (see Book.Serves).
type Open struct{ Bids, Asks bool }

// NewCheckedBook serializes a book whose levels the caller vouches for: every
// price and size a positive plain decimal and each side strictly ordered
// best first, at most MaxDepth levels. A local order book's top is such a
// book: the venue adapter checked each decimal as it arrived and the book
// keeps its sides ordered, so checking them again here would parse every
// price a third time on the way from a stream frame to a snapshot. seq is
// the venue's update id the levels are current at, 0 when unknown (see Seq).
func NewCheckedBook(tickerID string, venueTime, seq int64, bids, asks []Level, readAt time.Time) *Book {
	return NewLocalBook(tickerID, venueTime, seq, bids, asks, Open{}, readAt)
}

// NewLocalBook is NewCheckedBook for a book whose sides may end short of the
// venue's, as open says: a local order book's top, which vouches only for
// the levels its snapshot held and the diff stream changed since. A side
// with MaxDepth levels serves every request whatever open says.
func NewLocalBook(tickerID string, venueTime, seq int64, bids, asks []Level, open Open, readAt time.Time) *Book {
	bids = bids[:min(len(bids), MaxDepth)]
	asks = asks[:min(len(asks), MaxDepth)]
	// Every listed book is built about three times a second: the value,
	// its forms built later and its levels' ends are one allocation, its
	// body the other.
	value := &struct {
		Book
		later lazyForms
		ends  [2 * MaxDepth]int32
	}{}
	b := &value.Book
	*b = Book{
		tickerID: tickerID,
		time:     venueTime,
		seq:      seq,
		open:     open,
		readAt:   readAt.UnixNano(),
		version:  nextVersion(),
		later:    &value.later,
		bidEnds:  value.ends[:len(bids):len(bids)],
		askEnds:  value.ends[MaxDepth : MaxDepth+len(asks) : MaxDepth+len(asks)],
	}
	size := 64 + len(tickerID)
	for _, l := range bids {
		size += len(l.Price) + len(l.Size) + 8
	}
	for _, l := range asks {
		size += len(l.Price) + len(l.Size) + 8
	}
	body := make([]byte, 0, size)
	body = append(body, '{')
	body = appendStringField(body, "ticker_id", tickerID, true)
	body = appendIntField(body, "timestamp", venueTime, false)
	body = appendKey(body, "bids", false)
	body = append(body, '[')
	b.bidsOpen = int32(len(body))
	body = appendLevels(body, bids, b.bidEnds)
	b.bidsClose = int32(len(body))
	body = append(body, ']')
	body = appendKey(body, "asks", false)
	body = append(body, '[')
	b.asksOpen = int32(len(body))
	body = appendLevels(body, asks, b.askEnds)
	b.asksClose = int32(len(body))
	body = append(body, ']', '}')
	b.body = body
	return b
}

func checkSide(levels []Level, order int) error {
	for i, l := range levels {
		if !isPositive(l.Price) {
			return fmt.Errorf("level %d: price %q is not a positive plain decimal", i+1, l.Price)
		}
		if !isPositive(l.Size) {
			return fmt.Errorf("level %d: size %q is not a positive plain decimal", i+1, l.Size)
		}
		if i > 0 && comparePositive(levels[i-1].Price, l.Price) != order {
			return fmt.Errorf("level %d: price %s is out of order", i+1, l.Price)
		}
	}
	return nil
}

// appendLevels appends levels whose prices and sizes are plain decimals
// (checked by NewBook, or vouched for by NewCheckedBook's caller): they
// hold nothing to escape, so they are copied as they are, without the scan
// appendString makes of every byte.
func appendLevels(dst []byte, levels []Level, ends []int32) []byte {
	for i, l := range levels {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, '[', '"')
		dst = append(dst, l.Price...)
		dst = append(dst, '"', ',', '"')
		dst = append(dst, l.Size...)
		dst = append(dst, '"', ']')
		ends[i] = int32(len(dst))
	}
	return dst
}

// TickerID is the pair this book belongs to.
func (b *Book) TickerID() string { return b.tickerID }

// Time is the venue's clock for this book, in ms since the Unix epoch.
func (b *Book) Time() int64 { return b.time }

// ReadAt is when the service read this book, in Unix nanoseconds.
func (b *Book) ReadAt() int64 {
	if b == nil {
		return 0 // no read yet, as FreshAt says
	}
	return b.readAt
}

// Version identifies this value among every value the process has built.
func (b *Book) Version() uint64 { return b.version }

// Levels returns how many bid and ask levels the book holds.
func (b *Book) Levels() (bids, asks int) { return len(b.bidEnds), len(b.askEnds) }

// Open says which sides may continue at the venue beyond the levels the
// book holds (see Open).
func (b *Book) Open() Open { return b.open }

// Serves reports whether the book answers a request for depth levels a
// side (depth outside 1..MaxDepth means MaxDepth) with the venue's book:
// each side holds that many levels, or is closed (the venue's whole side).
// A book that does not is not served short to that request: it is read
// deeper first (decisions: "Order books"). It does not allocate.
func (b *Book) Serves(depth int) bool {
	if b == nil {
		return false // no read yet, as FreshAt says
	}
	if depth <= 0 || depth > MaxDepth {
		depth = MaxDepth
	}
	return (!b.open.Bids || len(b.bidEnds) >= depth) && (!b.open.Asks || len(b.askEnds) >= depth)
}

// Seq is the venue's update id the book's levels are current at (Binance's
// u of the last diff event applied), 0 when unknown. It is not published;
// it travels in the wire form, so that a process holding this book and the
// venue's diff stream can keep a local book from it without a REST read.
func (b *Book) Seq() int64 { return b.seq }

// Sides returns the book's levels, best first, read back from its body:
// for a process that starts a local book from it, never for a request.
// The strings share one allocation.
func (b *Book) Sides() (bids, asks []Level) {
	text := string(b.body)
	side := func(open int32, ends []int32) []Level {
		levels := make([]Level, len(ends))
		start := int(open)
		for i, end := range ends {
			// A level is ["price","size"], plain decimals with nothing
			// escaped (see appendLevels), after a comma but for the first.
			item := text[start:end]
			if i > 0 {
				item = item[1:]
			}
			price, size, _ := strings.Cut(item[2:len(item)-2], `","`)
			levels[i] = Level{Price: price, Size: size}
			start = int(end)
		}
		return levels
	}
	return side(b.bidsOpen, b.bidEnds), side(b.asksOpen, b.askEnds)
}

// Body is the response at full depth.
func (b *Book) Body() []byte { return b.body }

// Gzip is Body, the full-depth response, compressed with gzip: by the first
// call for this value (or a confirmed copy of it), then kept (see lazyGzip).
func (b *Book) Gzip() []byte { return b.later.gz.of(b.body) }

// Tag is the entity tag of this value, unquoted; responses of a smaller depth
// add the depth to it.
func (b *Book) Tag() []byte { return b.later.tag.of(b.body) }

// Parts returns the response for depth levels per side as three slices of the
// full body, to be written in order: the head through the last kept bid, the
// bids' close through the last kept ask, and the close of the asks and the
// object. depth outside 1..MaxDepth means MaxDepth. Nothing is copied.
func (b *Book) Parts(depth int) (head, middle, tail []byte) {
	if depth <= 0 || depth > MaxDepth {
		depth = MaxDepth
	}
	bidEnd := b.bidsOpen
	if n := min(depth, len(b.bidEnds)); n > 0 {
		bidEnd = b.bidEnds[n-1]
	}
	askEnd := b.asksOpen
	if n := min(depth, len(b.askEnds)); n > 0 {
		askEnd = b.askEnds[n-1]
	}
	return b.body[:bidEnd], b.body[b.bidsClose:askEnd], b.body[b.asksClose:]
}

// String describes the book for logs.
func (b *Book) String() string {
	return b.tickerID + " book @" + strconv.FormatInt(b.time, 10)
}

// Confirmed returns a copy of b read at at: the same bytes, version and tag,
// with a later read time. A book kept current from the venue's diff stream
// is republished this way when nothing changed, so that a quiet market stays
// fresh without being serialized again and caches keep revalidating with 304.
func (b *Book) Confirmed(at time.Time) *Book {
	c := *b
	c.readAt = at.UnixNano()
	return &c
}
