package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"marketfeed/internal/process"
	"marketfeed/internal/wire"
)

// The peer is the reference a plain integration stands for: net/http, the
// query parsed with url.Values, the answer encoded from structs with
// encoding/json on every request. It holds the same data marketfeed serves
// (read from marketfeed once at start) so that both write the same bytes,
// in the API's bodies as Go values (internal/wire): a field marketfeed
// writes that wire lacks fails the peer's start (see loadPeerData).

// peerData is everything the peer serves. It is read once and never changed,
// so handlers share it without locks.
type peerData struct {
	pairs     []wire.Pair
	tickers   []wire.Ticker
	contracts []wire.Contract
	specs     []wire.ContractSpec
	books     map[string]wire.Book
	trades    map[string][]wire.Trade
}

// runPeer is the peer subcommand: read the data, then serve until ctx is done.
func runPeer(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("loadbench peer", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:8090", "`address` to serve on")
	from := fs.String("from", "http://127.0.0.1:8080", "base `URL` of the marketfeed to read the data from")
	tickers := fs.String("ticker", "BTC_USDT", "comma-separated `ids` whose book and trades are served")
	if err := fs.Parse(args); err != nil {
		return err
	}
	client := &http.Client{Timeout: 10 * time.Second}
	data, err := loadPeerData(ctx, client, *from, strings.Split(*tickers, ","))
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: data.handler(), ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		shutCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutCtx)
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// loadPeerData reads pairs, tickers, contracts, their specifications and
// each ticker's full book and trades from marketfeed. Each answer must encode back to exactly the bytes read,
// which proves the structs carry everything marketfeed wrote and that the
// peer's answers are the same bytes as marketfeed's.
func loadPeerData(ctx context.Context, client *http.Client, base string, ids []string) (*peerData, error) {
	d := &peerData{books: map[string]wire.Book{}, trades: map[string][]wire.Trade{}}
	if err := fetchDecode(ctx, client, base+"/api/public/pairs", &d.pairs); err != nil {
		return nil, err
	}
	if err := fetchDecode(ctx, client, base+"/api/public/tickers", &d.tickers); err != nil {
		return nil, err
	}
	if err := fetchDecode(ctx, client, base+"/api/public/contracts", &d.contracts); err != nil {
		return nil, err
	}
	if err := fetchDecode(ctx, client, base+"/api/public/contract_specs", &d.specs); err != nil {
		return nil, err
	}
	for _, id := range ids {
		q := url.QueryEscape(id)
		var b wire.Book
		if err := fetchDecode(ctx, client, base+"/api/public/orderbook?ticker_id="+q, &b); err != nil {
			return nil, err
		}
		var t []wire.Trade
		if err := fetchDecode(ctx, client, base+"/api/public/trades?ticker_id="+q, &t); err != nil {
			return nil, err
		}
		d.books[id], d.trades[id] = b, t
	}
	return d, nil
}

func fetchDecode(ctx context.Context, client *http.Client, u string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("read %s: %w", u, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: status %d", u, resp.StatusCode)
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("decode %s: %w", u, err)
	}
	again, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if !bytes.Equal(again, body) {
		return fmt.Errorf("decode %s: the structs do not re-encode to the bytes read", u)
	}
	return nil
}

func (d *peerData) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/public/pairs", func(w http.ResponseWriter, r *http.Request) {
		writePeerJSON(w, d.pairs)
	})
	mux.HandleFunc("GET /api/public/tickers", func(w http.ResponseWriter, r *http.Request) {
		writePeerJSON(w, d.tickers)
	})
	mux.HandleFunc("GET /api/public/contracts", func(w http.ResponseWriter, r *http.Request) {
		writePeerJSON(w, d.contracts)
	})
	mux.HandleFunc("GET /api/public/contract_specs", func(w http.ResponseWriter, r *http.Request) {
		writePeerJSON(w, d.specs)
	})
	mux.HandleFunc("GET /api/public/orderbook", d.orderbook)
	mux.HandleFunc("GET /api/public/trades", d.tradeList)
	mux.HandleFunc("GET /api/public/historical_trades", d.tradeList)
	return mux
}

func (d *peerData) orderbook(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	book, ok := d.books[q.Get("ticker_id")]
	if !ok {
		http.Error(w, `{"error":"UNKNOWN_TICKER"}`, http.StatusNotFound)
		return
	}
	depth, err := optionalInt(q.Get("depth"))
	if err != nil {
		http.Error(w, `{"code":"VALIDATION_ERROR"}`, http.StatusBadRequest)
		return
	}
	if depth > 0 {
		book.Bids = book.Bids[:min(depth, len(book.Bids))]
		book.Asks = book.Asks[:min(depth, len(book.Asks))]
	}
	writePeerJSON(w, book)
}

func (d *peerData) tradeList(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	all, ok := d.trades[q.Get("ticker_id")]
	if !ok {
		http.Error(w, `{"error":"UNKNOWN_TICKER"}`, http.StatusNotFound)
		return
	}
	limit, err := optionalInt(q.Get("limit"))
	if err != nil {
		http.Error(w, `{"code":"VALIDATION_ERROR"}`, http.StatusBadRequest)
		return
	}
	side := q.Get("type")
	out := []wire.Trade{}
	for _, t := range all {
		if side != "" && t.Type != side {
			continue
		}
		if limit > 0 && len(out) == limit {
			break
		}
		out = append(out, t)
	}
	writePeerJSON(w, out)
}

// optionalInt reads depth or limit: absent or 0 means everything.
func optionalInt(s string) (int, error) {
	if s == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, errors.New("not a count")
	}
	return n, nil
}

// writePeerJSON writes v with the headers marketfeed sends on a 200.
func writePeerJSON(w http.ResponseWriter, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "public, max-age=5")
	h.Set("Access-Control-Allow-Origin", "*")
	_, _ = w.Write(b)
}

// startPeer starts the plain Go peer (this program's peer subcommand),
// reading its data from the running marketfeed.
func (b *bench) startPeer(ctx context.Context) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	// Readiness covers the pairs and tickers; the contracts the peer reads
	// too follow at the poller's first contracts round.
	mf := b.urls[srvMarketfeed]
	if err := process.WaitHTTP(ctx, b.owners[srvMarketfeed], mf+"/api/public/contracts", 10*time.Second); err != nil {
		return err
	}
	addr, err := process.FreeAddr()
	if err != nil {
		return err
	}
	p, err := process.Start(srvPeer, filepath.Join(b.dir, "peer.log"), process.Options{Pinned: true, CPU: b.cfg.serverCPU, Env: []string{"GOMAXPROCS=1"}},
		self, "peer", "-listen", addr, "-from", mf, "-ticker", b.cfg.ticker)
	if err != nil {
		return err
	}
	b.procs = append(b.procs, p)
	b.urls[srvPeer], b.owners[srvPeer] = "http://"+addr, p
	return process.WaitHTTP(ctx, p, b.urls[srvPeer]+"/api/public/pairs", 30*time.Second)
}
