package binance

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"marketfeed/internal/logthrottle"
	"marketfeed/poller/venue"
	"marketfeed/snapshot"
)

// Streams keeps a Binance-compatible venue's market streams: every watched
// symbol's stream of each kind (the diff depth stream <s>@depth@100ms and
// the aggregate trade stream <s>@aggTrade), and the whole-market streams
// (the tickers !ticker@arr and the mark prices !markPrice@arr@1s): one row
// each in kinds.go's tables. It implements venue.Streams.
//
// Streams are spread over connections of at most the preset's PerConn
// streams each, on the path the venue routes them to (Binance serves depth
// and market data on different paths). A connection opens without names in
// its URL and subscribes them with SUBSCRIBE messages of at most
// NamesPerSubscribe names, sent no faster than ControlPerSecond. A stream is
// reported Live once the venue acknowledged it, and Lost when its connection
// closes, the venue refuses it, or one of its events cannot be used.
//
// Each connection is replaced before the venue's own close: the daily one,
// or a shorter one the venue's closes have shown (a proxy in front of it,
// or a venue whose limit is shorter than documented: see rotation.go). A
// new connection subscribes the same names and is acknowledged before the
// old one is closed, a moment later (see slot.handOver), so a replacement
// loses nothing and reports no Lost. Each connection's replacements come on
// its own turn of the rotation period, so that replacements never
// coincide, and a connection the venue closes on its schedule is dialled
// again at once.
//
// With two lines (StreamOptions.Lines), every stream is carried by two
// connections, one of each line, whose turns are half a period apart. A
// symbol's event is delivered once, by whichever line brings it first; the
// other copy is dropped after its ids are compared, before its levels are
// read. A stream is reported Lost only when both its connections lost it,
// so a line that drops, is replaced or is closed by the venue costs
// nothing.
//
// Its fields are the settings from New, the connections' bookkeeping under
// mu (what the lines carry and what was delivered lock themselves), and
// Run's lifetime: one owner for all of them, since each connection needs
// all of them, so they stay together rather than split across types.
type Streams struct {
	preset   StreamPreset
	base     string
	maxAge   time.Duration
	log      *slog.Logger
	dialOpts func() DialOptions
	throttle *logthrottle.Throttle
	met      *streamMetrics

	nextID  atomic.Int64 // control message ids, unique across connections
	carried carriers     // which lines carry each stream live
	dups    dedup        // what each symbol last delivered: copies are dropped
	// epoch is where the slots' turns of the rotation period are counted
	// from; closes what the venue's closes taught, and learnedAge the
	// closing age last learned from them, in nanoseconds (0: none).
	epoch      time.Time
	closes     closeAges
	learnedAge atomic.Int64
	outage     outage // the connections down, for the line that ends an outage

	mu sync.Mutex
	// perConn is the most streams a connection is given: the preset's
	// PerConn, halved each time the venue closes a connection for breaking
	// its rules (a venue whose real limit is lower than documented).
	perConn int
	symbols map[string]bool
	lines   []*line
	// While Run runs: its context, sink and the goroutines it waits for.
	runCtx  context.Context
	sink    venue.Sink
	wg      sync.WaitGroup
	started bool
}

var _ venue.Streams = (*Streams)(nil)

// group is a set of connections to one path.
type group int

const (
	groupDepth  group = iota // the depth path: <s>@depth@100ms
	groupMarket              // the market path: <s>@aggTrade and !ticker@arr
	numGroups
)

// DialOptions is what a connection is dialled with.
type DialOptions struct {
	// HTTPClient performs the opening handshake; nil means the websocket
	// library's default client.
	HTTPClient *http.Client
}

// StreamOptions adjust Streams. The zero value is ready to use.
type StreamOptions struct {
	// BaseURL replaces the preset's stream URL (ws:// or wss://, without a
	// trailing slash); the preset's depth and market paths are appended.
	BaseURL string
	// Logger receives the streams' log lines; nil means slog.Default().
	Logger *slog.Logger
	// Metrics is where the stream metrics are registered; nil means a
	// private set. A set holds the metrics of one Streams only.
	Metrics *metrics.Set
	// MaxAge is the oldest a connection grows before it is replaced; zero
	// or negative means the preset's Lifetime less 30 minutes. A venue seen
	// closing connections younger has them replaced sooner.
	MaxAge time.Duration
	// Dial gives the options each connection is dialled with; nil means
	// the defaults.
	Dial func() DialOptions
	// Lines is how many connections carry each stream: 1 (zero means 1),
	// or 2 for redundant lines. More than 2 is taken as 2.
	Lines int
}

// Timing of connections and control messages. Variables, not constants,
// only so that documentation and tests can name them.
var (
	// backoffMin and backoffMax bound the pause before a connection is
	// dialled again or a refused subscription retried.
	backoffMin = time.Second
	backoffMax = time.Minute
	// healthyAge is how long a connection must have served for its close
	// to start the back-off afresh: one the venue accepted, subscribed and
	// kept for this long was not refused. Only a connection older than
	// backoffMax, or one the venue closed on its schedule, is dialled again
	// at once; a younger one waits the first, jittered, step, which keeps
	// the two lines' connections from being opened, and closed by a venue
	// with a shorter age limit, together. Counting only connections older
	// than backoffMax as healthy was too long: after every connection was
	// cut and dialled again, an outage that cut them again within the
	// minute went on from the back-off the first cut had left, and with
	// the venue refusing for 10 s, the streams came back some 20 s after
	// the venue did.
	healthyAge = 10 * time.Second
	// replyTimeout is how long a control message may wait for its reply
	// before the connection is considered broken.
	replyTimeout = 10 * time.Second
	// dialTimeout bounds the opening handshake.
	dialTimeout = 10 * time.Second
	// maxAgeMargin is how long before the venue's own close a connection is
	// replaced by default.
	maxAgeMargin = 30 * time.Minute
)

// maxFrame is the read limit of a connection. The all-market ticker frame
// lists every symbol that changed, several hundred rows of about 300 bytes;
// 8 MiB leaves room for far more symbols than any venue lists, while still
// refusing a runaway frame.
const maxFrame = 8 << 20

// NewStreams returns the market streams of the venue p describes. Nothing
// connects before Run.
func NewStreams(p Preset, opts StreamOptions) *Streams {
	sp := p.Streams
	base := sp.URL
	if opts.BaseURL != "" {
		base = opts.BaseURL
	}
	maxAge := opts.MaxAge
	if maxAge <= 0 {
		maxAge = sp.Lifetime - maxAgeMargin
	}
	if maxAge <= 0 {
		maxAge = time.Hour
	}
	sp.PerConn = max(sp.PerConn, 2)
	sp.NamesPerSubscribe = max(sp.NamesPerSubscribe, 1)
	sp.ControlPerSecond = max(sp.ControlPerSecond, 1)
	logger := opts.Logger
	if logger == nil {
		logger = slog.Default()
	}
	set := opts.Metrics
	if set == nil {
		set = metrics.NewSet()
	}
	dial := opts.Dial
	if dial == nil {
		dial = func() DialOptions { return DialOptions{} }
	}
	s := &Streams{
		preset:   sp,
		base:     strings.TrimRight(base, "/"),
		maxAge:   maxAge,
		log:      logger.With("component", "streams", "venue", p.Name),
		dialOpts: dial,
		throttle: logthrottle.New(time.Minute),
		epoch:    time.Now(),
		perConn:  sp.PerConn,
		symbols:  make(map[string]bool),
	}
	for n := range min(max(opts.Lines, 1), maxLines) {
		s.lines = append(s.lines, &line{n: n, where: make(map[string]*slot)})
	}
	s.met = newStreamMetrics(set)
	set.NewGauge(`marketfeed_stream_connections`, func() float64 { return float64(s.met.conns.Load()) })
	set.NewGauge(`marketfeed_stream_per_connection`, func() float64 {
		s.mu.Lock()
		defer s.mu.Unlock()
		return float64(s.perConn)
	})
	set.NewGauge(`marketfeed_stream_venue_close_age_seconds`, func() float64 {
		return time.Duration(s.learnedAge.Load()).Seconds()
	})
	set.NewGauge(`marketfeed_stream_max_age_seconds`, func() float64 { return s.Rotation().MaxAge.Seconds() })
	return s
}

// streamMetrics are the counters named in the service's documentation.
type streamMetrics struct {
	conns atomic.Int64
	// events counts the events delivered of each per-pair kind, and
	// wholeEvents the frames delivered of each whole-market stream.
	events        [snapshot.NumStreams]*metrics.Counter
	wholeEvents   [len(wholeMarket)]*metrics.Counter
	unknownEvents *metrics.Counter
	duplicates    *metrics.Counter
	badFrames     *metrics.Counter
	closed        *metrics.Counter
	refused       *metrics.Counter
	rotated       *metrics.Counter
	subscribeErrs *metrics.Counter
}

func newStreamMetrics(set *metrics.Set) *streamMetrics {
	m := &streamMetrics{
		unknownEvents: set.NewCounter(`marketfeed_stream_events_total{kind="unknown"}`),
		duplicates:    set.NewCounter(`marketfeed_stream_duplicates_total`),
		badFrames:     set.NewCounter(`marketfeed_stream_bad_frames_total`),
		closed:        set.NewCounter(`marketfeed_stream_reconnects_total{reason="closed"}`),
		refused:       set.NewCounter(`marketfeed_stream_reconnects_total{reason="refused"}`),
		rotated:       set.NewCounter(`marketfeed_stream_reconnects_total{reason="rotated"}`),
		subscribeErrs: set.NewCounter(`marketfeed_stream_subscribe_errors_total`),
	}
	for k := range snapshot.NumStreams {
		m.events[k] = set.NewCounter(`marketfeed_stream_events_total{kind="` + k.VenueStream() + `"}`)
	}
	for i, w := range wholeMarket {
		m.wholeEvents[i] = set.NewCounter(`marketfeed_stream_events_total{kind="` + w.doc.String() + `"}`)
	}
	return m
}

// streamRef is what a stream name stands for: a symbol's stream of a
// kind, or a whole-market stream, which has no kind and no symbol.
type streamRef struct {
	kind   snapshot.Stream
	symbol string
	// marks are the symbol's marks in the table of what was delivered
	// (dedup) when the stream was placed: its events reach them through
	// their route, without looking the symbol up (see dedup.marksOf). nil
	// for a whole-market stream.
	marks     *marks
	allMarket bool
	whole     int // the whole-market stream's row of wholeMarket
}

// sameWatch reports whether r and o stand for the same watch of their
// symbol: a symbol unwatched and watched again has new marks (see
// dedup.watch), and its streams' routes must take them.
func (r streamRef) sameWatch(o streamRef) bool { return r.marks == o.marks }

// usableSymbol reports whether a symbol can be part of a stream name: the
// venue separates names with '/' in URLs and parts of a name with '@'.
func usableSymbol(sym string) bool {
	return sym != "" && !strings.ContainsAny(sym, "@/ \t\r\n\"\\")
}

// Watch sets the symbols whose depth and trade streams are kept. New
// symbols are subscribed on connections with room, or on new connections;
// symbols no longer listed are unsubscribed. Symbols that cannot be part
// of a stream name are ignored. It is safe to call at any time.
//
// A symbol's events reach the sink as events of the string the symbol was
// first watched by (while it stays watched), not of a copy: a sink that
// gives Watch the strings it keys its markets by finds a market by the
// string's address.
func (s *Streams) Watch(symbols []string) {
	want := make(map[string]bool, len(symbols))
	for _, sym := range symbols {
		if usableSymbol(sym) {
			want[sym] = true
		}
	}
	var removed []string
	s.mu.Lock()
	s.ensureWholeMarket()
	for sym := range s.symbols {
		if want[sym] {
			continue
		}
		delete(s.symbols, sym)
		removed = append(removed, sym)
		for _, kind := range allKinds {
			name := streamName(kind, sym)
			for _, l := range s.lines {
				if sl := l.where[name]; sl != nil {
					sl.remove(name)
					delete(l.where, name)
				}
			}
		}
	}
	var added []string
	for _, sym := range symbols {
		if want[sym] && !s.symbols[sym] {
			s.symbols[sym] = true
			added = append(added, sym)
		}
	}
	// The table knows the new symbols before any is subscribed, so that
	// their first reports and events are not taken for a symbol's no
	// longer watched.
	s.dups.watch(s.symbols)
	for _, sym := range added {
		for _, kind := range allKinds {
			for _, l := range s.lines {
				s.place(l, streamName(kind, sym), streamRef{kind: kind, symbol: sym, marks: s.dups.of(sym)}, groupOf(kind))
			}
		}
	}
	s.mu.Unlock()
	// Not under mu: carriers tells the sink under its own lock, and the
	// sink's owner may hold its own locks when it calls Resubscribe, which
	// takes mu.
	for _, sym := range removed {
		s.carried.forget(sym)
	}
}

// ensureWholeMarket places the whole-market streams (see wholeMarket) on
// the first connection of their group of each line. Called with s.mu held.
func (s *Streams) ensureWholeMarket() {
	for _, l := range s.lines {
		for i, w := range wholeMarket {
			if l.where[w.name] == nil {
				s.place(l, w.name, streamRef{allMarket: true, whole: i}, w.group)
			}
		}
	}
}

// place puts a stream on the first connection of l's group g with room,
// making a new one when all are full. Called with s.mu held.
func (s *Streams) place(l *line, name string, ref streamRef, g group) {
	var sl *slot
	for _, c := range l.groups[g] {
		if c.size() < s.perConn {
			sl = c
			break
		}
	}
	if sl == nil {
		sl = s.newSlot(l, g)
		l.groups[g] = append(l.groups[g], sl)
		if s.started {
			s.wg.Go(func() { sl.run(s.runCtx, s.sink) })
		}
	}
	sl.add(name, ref)
	l.where[name] = sl
}

// Resubscribe sends UNSUBSCRIBE and then SUBSCRIBE for one symbol's stream
// on the connections that carry it, and reports it Live once acknowledged:
// the answer to a stream that was acknowledged and then stayed silent. A
// symbol that is not watched is ignored.
func (s *Streams) Resubscribe(kind snapshot.Stream, symbol string) {
	name := streamName(kind, symbol)
	s.mu.Lock()
	var slots []*slot
	for _, l := range s.lines {
		if sl := l.where[name]; sl != nil {
			slots = append(slots, sl)
		}
	}
	s.mu.Unlock()
	for _, sl := range slots {
		sl.resubscribe(name)
	}
}

// errRunning is returned by a second Run.
var errRunning = errors.New("run streams: already running")

// Run keeps the streams flowing into sink until ctx is done, then closes
// every connection and returns ctx's error once every goroutine it started
// has ended. Run may be called once.
func (s *Streams) Run(ctx context.Context, sink venue.Sink) error {
	s.mu.Lock()
	if s.started {
		s.mu.Unlock()
		return errRunning
	}
	s.ensureWholeMarket()
	s.started = true
	s.runCtx, s.sink = ctx, sink
	for _, l := range s.lines {
		for _, g := range l.groups {
			for _, sl := range g {
				s.wg.Go(func() { sl.run(ctx, sink) })
			}
		}
	}
	s.mu.Unlock()

	<-ctx.Done()
	// No slot is started once Run stops waiting: place checks started
	// under the same lock.
	s.mu.Lock()
	s.started = false
	s.mu.Unlock()
	s.wg.Wait()
	return ctx.Err()
}

// shrink answers a connection the venue closed for breaking its rules
// (close status 1008, policy violation): a venue whose limit on streams per
// connection is lower than documented closes every connection that
// subscribes more, and would keep doing so after every reconnection. The
// cap is halved and the slot's streams beyond it move to other connections,
// so that the streams come back instead of looping. It returns the new cap.
func (s *Streams) shrink(sl *slot) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.perConn = max(min(s.perConn, sl.size()/2), 1)
	_, names := sl.wanted()
	if len(names) <= s.perConn {
		return s.perConn
	}
	for _, name := range names[s.perConn:] {
		ref := sl.take(name)
		s.place(sl.line, name, ref, sl.group)
	}
	return s.perConn
}

// newSlot returns an empty connection slot of l's group g. Called with
// s.mu held.
func (s *Streams) newSlot(l *line, g group) *slot {
	path := s.preset.DepthPath
	if g == groupMarket {
		path = s.preset.MarketPath
	}
	return &slot{
		s:     s,
		line:  l,
		group: g,
		url:   s.base + path,
		phase: slotPhase(l.n, len(l.groups[groupDepth])+len(l.groups[groupMarket])),
		want:  make(map[string]streamRef),
		resub: make(map[string]bool),
		wake:  make(chan struct{}, 1),
	}
}

// Rotation is how the streams replace their connections.
type Rotation struct {
	// VenueCloseAge is the age at which the venue was seen closing
	// connections on its own schedule; zero when it was not (lately).
	VenueCloseAge time.Duration
	// MaxAge is the oldest a connection grows before it is replaced:
	// StreamOptions.MaxAge, or less before a VenueCloseAge.
	MaxAge time.Duration
}

// Rotation reports how the streams replace their connections now.
func (s *Streams) Rotation() Rotation {
	age := time.Duration(s.learnedAge.Load())
	return Rotation{VenueCloseAge: age, MaxAge: rotationLimit(s.maxAge, age)}
}

// warn logs a problem of the streams at most once a minute per key, with
// the count of the repeats it held back.
func (s *Streams) warn(key, msg string, args ...any) {
	s.throttle.Log(s.log, slog.LevelWarn, key, msg, args...)
}

// outage follows the connections that closed, broke or could not be opened
// until each is subscribed again, so that the log says when the streams are
// all back, once, as it says when each went down (see slot.run).
type outage struct {
	mu    sync.Mutex
	down  map[*slot]bool
	since time.Time // when the first of them went down
}

// slotDown records that sl's connection is down.
func (s *Streams) slotDown(sl *slot) {
	o := &s.outage
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.down == nil {
		o.down = make(map[*slot]bool)
	}
	if len(o.down) == 0 {
		o.since = time.Now()
	}
	o.down[sl] = true
}

// slotUp records that sl's connection is subscribed, and logs the end of
// the outage when it was the last one down.
func (s *Streams) slotUp(sl *slot) {
	o := &s.outage
	o.mu.Lock()
	if !o.down[sl] {
		o.mu.Unlock()
		return
	}
	delete(o.down, sl)
	last, since := len(o.down) == 0, o.since
	o.mu.Unlock()
	if last {
		s.log.Info("market streams up again: every connection subscribed",
			"down_for", time.Since(since).Round(time.Millisecond))
	}
}
