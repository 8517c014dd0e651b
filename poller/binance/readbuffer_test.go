package binance

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/coder/websocket"
)

// countingConn counts the reads of the socket beneath a connection.
type countingConn struct {
	net.Conn
	reads *atomic.Int32
}

func (c countingConn) Read(p []byte) (int, error) {
	c.reads.Add(1)
	return c.Conn.Read(p)
}

// A heartbeat's frames, sent together, are read from the socket a few at a
// time, not one read of 4 KiB after another: 100 frames of 600 bytes
// (60 KB) waiting on the socket take at most two reads.
func TestStreamConnectionReadsWaitingFramesInFewReads(t *testing.T) {
	const frames, size = 100, 600
	sent := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{CompressionMode: websocket.CompressionDisabled})
		if err != nil {
			return
		}
		defer ws.CloseNow()
		msg := []byte(strings.Repeat("x", size))
		for range frames {
			if err := ws.Write(r.Context(), websocket.MessageText, msg); err != nil {
				return
			}
		}
		close(sent)
		_, _, _ = ws.Read(r.Context()) // until the client closes
	}))
	defer srv.Close()

	var reads atomic.Int32
	var base net.Dialer
	tr := &http.Transport{DialContext: readBuffered(func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := base.DialContext(ctx, network, addr)
		return countingConn{c, &reads}, err
	})}
	defer tr.CloseIdleConnections()
	ctx := context.Background()
	ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http"), &websocket.DialOptions{
		HTTPClient: &http.Client{Transport: tr}, CompressionMode: websocket.CompressionDisabled,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	<-sent // every frame is on the socket before the first is read
	before := reads.Load()
	for i := range frames {
		_, b, err := ws.Read(ctx)
		if err != nil || len(b) != size {
			t.Fatalf("frame %d: %d bytes, %v", i, len(b), err)
		}
	}
	if n := reads.Load() - before; n > 2 {
		t.Fatalf("%d frames of %d bytes took %d reads of the socket, want at most 2", frames, size, n)
	}
}
