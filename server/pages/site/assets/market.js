// The live market page: every pair of /api/public/pairs in a table, and the
// open pair's depth chart, trades and contract or ticker. It reads this
// host's public routes and nothing else, on a fixed schedule that does not
// grow with the number of pairs: the pair list every minute, the two
// whole-market documents (tickers, contracts) every 5 s, and only the open
// pair's book and trades every 3 s, about 70 requests a minute against the
// limit of 600 a minute per address. A route that fails (502 while the
// venue cannot be read) shows as unavailable where its data is shown; the
// rest goes on.
'use strict';

(function () {
  const API = 'api/public/';
  const EVERY = { pairs: 60000, market: 5000, pair: 3000 };
  const TRADES = 20; // trades listed for the open pair

  const $ = (sel) => document.querySelector(sel);
  const state = {
    pairs: [],
    rows: new Map(), // ticker_id -> {tr, cells, pair, values}
    tickers: new Map(),
    contracts: new Map(),
    failed: {}, // route -> message, while it fails
    seen: new Map(), // ticker_id -> {book, trades}: timestamps of what this page read
    down: new Set(), // pairs whose book or trades answered an error last
    open: null,
    sort: { key: 'id', dir: 1 },
    pausedUntil: 0, // after a 429, nothing is asked until then
    timers: {},
    loops: {}, // name -> the running loop's token
  };

  // read GETs a public route. It resolves to {ok, status, body} or
  // {ok: false, status, message}, never throws: a failure is shown, not
  // logged, so that a venue outage is not a page error.
  async function read(path) {
    let resp;
    try {
      // no-cache revalidates with the entity tag: a 304 when nothing changed.
      resp = await fetch(API + path, { cache: 'no-cache' });
    } catch (e) {
      return { ok: false, status: 0, message: 'no answer from the server' };
    }
    let body = null;
    try {
      body = await resp.json();
    } catch (e) {
      body = null;
    }
    if (resp.status === 429) {
      const wait = parseInt(resp.headers.get('Retry-After') || '5', 10);
      state.pausedUntil = Date.now() + wait * 1000;
    }
    if (!resp.ok || body === null) {
      const message = (body && body.message) || resp.statusText || 'unreadable answer';
      return { ok: false, status: resp.status, message };
    }
    return { ok: true, status: resp.status, body };
  }

  // every runs fn now and then every ms (a number, or a function giving
  // the next wait), skipping while the tab is hidden or a 429 asked to
  // wait. Starting a loop again ends the one before, also when that one is
  // waiting for an answer: it must not schedule itself after it, or each
  // quick reopening of a pair would add a loop.
  function every(name, ms, fn) {
    clearTimeout(state.timers[name]);
    const loop = (state.loops[name] = {});
    const run = async () => {
      if (!document.hidden && Date.now() >= state.pausedUntil) {
        await fn();
      }
      if (state.loops[name] === loop) state.timers[name] = setTimeout(run, typeof ms === 'function' ? ms() : ms);
    };
    run();
  }

  function stop(name) {
    clearTimeout(state.timers[name]);
    delete state.loops[name];
  }

  // ---- formatting ----

  const volumeFormat = new Intl.NumberFormat('en', { notation: 'compact', maximumFractionDigits: 2 });

  function decimals(s) {
    const i = s.indexOf('.');
    return i < 0 ? 0 : s.length - i - 1;
  }

  function mid(bid, ask) {
    if (!bid || !ask || +bid <= 0 || +ask <= 0) return '';
    return ((+bid + +ask) / 2).toFixed(Math.max(decimals(bid), decimals(ask)) + 1);
  }

  function age(ts) {
    if (!ts) return '—';
    const ms = Math.max(0, Date.now() - ts);
    if (ms < 10000) return (ms / 1000).toFixed(1) + ' s';
    if (ms < 120000) return Math.round(ms / 1000) + ' s';
    if (ms < 7200000) return Math.round(ms / 60000) + ' min';
    return Math.round(ms / 3600000) + ' h';
  }

  function time(ts) {
    return new Date(ts).toISOString().slice(11, 23);
  }

  function setText(el, text) {
    if (el.textContent !== text) el.textContent = text;
  }

  // ---- the table ----

  const COLUMNS = ['id', 'kind', 'last', 'mid', 'baseVolume', 'targetVolume', 'quoteAge', 'bookAge', 'tradesAge'];
  const NUMERIC = new Set(['last', 'mid', 'baseVolume', 'targetVolume', 'quoteAge', 'bookAge', 'tradesAge']);

  function makeRow(p) {
    const tr = document.createElement('tr');
    tr.dataset.id = p.ticker_id;
    const cells = {};
    for (const key of COLUMNS) {
      const td = document.createElement('td');
      if (NUMERIC.has(key)) td.className = 'num';
      tr.appendChild(td);
      cells[key] = td;
    }
    const a = document.createElement('a');
    a.href = '#' + p.ticker_id;
    a.textContent = p.ticker_id;
    cells.id.appendChild(a);
    cells.kind.textContent = p.kind;
    return { tr, cells, pair: p, values: {} };
  }

  // quote is the row a pair's prices come from: its ticker for a spot
  // pair, its contract for a perpetual (or a spot pair without a ticker).
  function quote(p) {
    return (p.kind === 'spot' && state.tickers.get(p.ticker_id)) || state.contracts.get(p.ticker_id) || null;
  }

  function fill(row) {
    const q = quote(row.pair);
    const seen = state.seen.get(row.pair.ticker_id) || {};
    const v = {
      id: row.pair.ticker_id,
      kind: row.pair.kind,
      last: q ? q.last_price : '',
      mid: q ? mid(q.bid, q.ask) : '',
      baseVolume: q ? q.base_volume : '',
      targetVolume: q ? q.target_volume : '',
      quoteAge: q ? q.timestamp : 0,
      bookAge: seen.book || 0,
      tradesAge: seen.trades || 0,
    };
    row.values = v;
    const c = row.cells;
    setText(c.last, v.last || '—');
    setText(c.mid, v.mid || '—');
    setText(c.baseVolume, v.baseVolume ? volumeFormat.format(+v.baseVolume) : '—');
    setText(c.targetVolume, v.targetVolume ? volumeFormat.format(+v.targetVolume) : '—');
    const down = state.down.has(v.id);
    row.tr.classList.toggle('unavailable', down);
    row.tr.classList.toggle('open', v.id === state.open);
    ages(row);
  }

  function ages(row) {
    const v = row.values;
    const c = row.cells;
    setText(c.quoteAge, age(v.quoteAge));
    setText(c.bookAge, state.down.has(v.id) ? 'unavailable' : age(v.bookAge));
    setText(c.tradesAge, age(v.tradesAge));
  }

  function compare(a, b) {
    const { key, dir } = state.sort;
    let x = a.values[key];
    let y = b.values[key];
    if (key.endsWith('Age')) {
      // Newest first reads as youngest first: an age sorts by -timestamp,
      // and a row never read sorts last.
      x = x ? -x : Infinity;
      y = y ? -y : Infinity;
    } else if (NUMERIC.has(key)) {
      x = x === '' ? -Infinity : +x;
      y = y === '' ? -Infinity : +y;
    }
    if (x < y) return -dir;
    if (x > y) return dir;
    return a.values.id < b.values.id ? -1 : 1;
  }

  function render() {
    const filter = $('#filter').value.trim().toUpperCase();
    const kind = $('#kind').value;
    const rows = [...state.rows.values()];
    rows.forEach(fill);
    rows.sort(compare);
    let shown = 0;
    for (const row of rows) {
      const match = (!filter || row.pair.ticker_id.includes(filter)) && (!kind || row.pair.kind === kind);
      row.tr.hidden = !match;
      if (match) shown++;
    }
    $('#pairs tbody').append(...rows.map((r) => r.tr));
    setText($('#count'), shown === rows.length ? `(${rows.length})` : `(${shown} of ${rows.length})`);
    status();
  }

  function status() {
    const failed = Object.entries(state.failed).map(([route, message]) => `${route} unavailable: ${message}`);
    if (state.pausedUntil > Date.now()) failed.push('rate limited: waiting');
    const el = $('#status');
    setText(el, failed.join(' · '));
    el.classList.toggle('unavailable', failed.length > 0);
  }

  function outcome(route, r) {
    if (r.ok) delete state.failed[route];
    else state.failed[route] = r.status ? `${r.status} ${r.message}` : r.message;
  }

  async function readPairs() {
    const r = await read('pairs');
    outcome('pairs', r);
    if (r.ok) {
      state.pairs = r.body;
      const listed = new Set();
      for (const p of state.pairs) {
        listed.add(p.ticker_id);
        const row = state.rows.get(p.ticker_id) || makeRow(p);
        row.pair = p;
        state.rows.set(p.ticker_id, row);
      }
      for (const [id, row] of state.rows) {
        if (!listed.has(id)) {
          row.tr.remove();
          state.rows.delete(id);
        }
      }
      if (state.open) openPair(state.open, false);
    }
    render();
  }

  async function readMarket() {
    const [tickers, contracts] = await Promise.all([read('tickers'), read('contracts')]);
    outcome('tickers', tickers);
    outcome('contracts', contracts);
    if (tickers.ok) state.tickers = new Map(tickers.body.map((t) => [t.ticker_id, t]));
    if (contracts.ok) state.contracts = new Map(contracts.body.map((c) => [c.ticker_id, c]));
    render();
    if (state.open) details(state.open);
  }

  // ---- the open pair ----

  function openPair(id, poll) {
    const row = state.rows.get(id);
    if (!row) {
      if (state.pairs.length) closePair();
      return; // not (yet) listed: the pair list decides
    }
    const changed = state.open !== id;
    state.open = id;
    $('#pair').hidden = false;
    setText($('#pair-title'), id + ' · ' + row.pair.kind);
    if (changed) {
      $('#depth').textContent = '';
      $('#depth').removeAttribute('data-timestamp');
      $('#trades tbody').textContent = '';
      for (const el of ['#best-bid', '#best-ask', '#spread', '#book-age', '#levels']) setText($(el), '—');
      setText($('#pair-status'), 'reading…');
      details(id);
      render();
    }
    if (poll) every('pair', EVERY.pair, readPair);
  }

  function closePair() {
    stop('pair');
    state.open = null;
    $('#pair').hidden = true;
    render();
  }

  async function readPair() {
    const id = state.open;
    if (!id) return;
    const q = encodeURIComponent(id);
    const [book, trades] = await Promise.all([read(`orderbook?ticker_id=${q}`), read(`trades?ticker_id=${q}&limit=${TRADES}`)]);
    if (id !== state.open) return; // another pair was opened meanwhile
    const seen = state.seen.get(id) || {};
    state.seen.set(id, seen);
    const problems = [];
    if (book.ok) {
      seen.book = book.body.timestamp;
      drawBook(book.body);
    } else {
      problems.push(`order book unavailable: ${book.status || ''} ${book.message}`);
      unavailableBook();
    }
    if (trades.ok) {
      seen.trades = trades.body.length ? trades.body[0].trade_timestamp : 0;
      listTrades(trades.body);
    } else {
      problems.push(`trades unavailable: ${trades.status || ''} ${trades.message}`);
      $('#trades tbody').textContent = '';
    }
    if (book.ok && trades.ok) state.down.delete(id);
    else state.down.add(id);
    const el = $('#pair-status');
    setText(el, problems.join(' · '));
    el.classList.toggle('unavailable', problems.length > 0);
    render();
  }

  function details(id) {
    const row = state.rows.get(id);
    if (!row) return;
    const perp = row.pair.kind === 'perp';
    const src = perp ? state.contracts.get(id) : state.tickers.get(id);
    setText($('#details-title'), perp ? 'Contract' : 'Ticker');
    const fields = perp
      ? [
          ['Mark price', src && src.contract_price],
          ['Index price', src && src.index_price],
          ['Funding rate', src && src.funding_rate + ' %'],
          ['Next funding', src && src.next_funding_rate_timestamp && new Date(src.next_funding_rate_timestamp).toISOString().slice(0, 16).replace('T', ' ') + ' UTC'],
          ['Open interest', src && src.open_interest !== null ? src.open_interest + ' ' + src.base_currency : 'not read yet'],
          ['Open interest (USD)', src && src.open_interest_usd !== null ? src.open_interest_usd : '—'],
          ['Last', src && src.last_price],
          ['24 h high / low', src && src.high + ' / ' + src.low],
        ]
      : [
          ['Last', src && src.last_price],
          ['Bid / ask', src && src.bid + ' / ' + src.ask],
          ['24 h high / low', src && src.high + ' / ' + src.low],
          ['24 h volume', src && src.base_volume + ' ' + src.base_currency],
          ['24 h quote volume', src && src.target_volume + ' ' + src.target_currency],
          ['Priced from', row.pair.price_source],
        ];
    const tbody = $('#details tbody');
    tbody.textContent = '';
    const failed = state.failed[perp ? 'contracts' : 'tickers'];
    for (const [name, value] of fields) {
      const tr = tbody.insertRow();
      const th = document.createElement('th');
      th.textContent = name;
      tr.appendChild(th);
      tr.insertCell().textContent = value || (failed ? 'unavailable' : '—');
    }
  }

  function listTrades(trades) {
    const tbody = $('#trades tbody');
    tbody.textContent = '';
    for (const t of trades) {
      const tr = tbody.insertRow();
      tr.className = t.type;
      tr.insertCell().textContent = time(t.trade_timestamp);
      const price = tr.insertCell();
      price.className = 'num';
      price.textContent = t.price;
      const size = tr.insertCell();
      size.className = 'num';
      size.textContent = t.base_volume;
      tr.insertCell().textContent = t.type;
    }
    setText($('#trades-age'), trades.length ? 'newest ' + age(trades[0].trade_timestamp) + ' ago' : 'none in the window');
  }

  function unavailableBook() {
    const svg = $('#depth');
    svg.textContent = '';
    svg.removeAttribute('data-timestamp');
    svg.appendChild(svgText(320, 130, 'order book unavailable', 'middle', 'unavailable'));
    for (const el of ['#best-bid', '#best-ask', '#spread', '#levels']) setText($(el), '—');
    setText($('#book-age'), 'unavailable');
  }

  // ---- the depth chart ----

  const SVG = 'http://www.w3.org/2000/svg';
  const W = 640;
  const H = 260;
  const PAD = { left: 64, right: 10, top: 12, bottom: 26 };

  function svgEl(name, attrs) {
    const el = document.createElementNS(SVG, name);
    for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, v);
    return el;
  }

  function svgText(x, y, text, anchor, cls) {
    const el = svgEl('text', { x, y, 'text-anchor': anchor, class: cls || '' });
    el.textContent = text;
    return el;
  }

  // cumulate turns levels ([price, size] strings, best first) into
  // [price, size so far] numbers: one point per level.
  function cumulate(levels) {
    let sum = 0;
    return levels.map(([p, s]) => [+p, (sum += +s)]);
  }

  // drawBook draws the book as cumulative depth: each side one polyline
  // with a vertex per level, from the best price outwards.
  function drawBook(book) {
    const bids = cumulate(book.bids);
    const asks = cumulate(book.asks);
    const svg = $('#depth');
    svg.textContent = '';
    svg.dataset.timestamp = book.timestamp;
    if (!bids.length && !asks.length) {
      svg.appendChild(svgText(W / 2, H / 2, 'the book is empty', 'middle', 'label'));
      return;
    }
    const prices = [...bids, ...asks].map((l) => l[0]);
    const lo = Math.min(...prices);
    const hi = Math.max(...prices);
    const top = Math.max(bids.length ? bids[bids.length - 1][1] : 0, asks.length ? asks[asks.length - 1][1] : 0) || 1;
    const x = (p) => PAD.left + (hi === lo ? 0.5 : (p - lo) / (hi - lo)) * (W - PAD.left - PAD.right);
    const y = (c) => H - PAD.bottom - (c / top) * (H - PAD.top - PAD.bottom);
    const base = y(0);
    svg.appendChild(svgEl('line', { x1: PAD.left, y1: base, x2: W - PAD.right, y2: base, class: 'axis' }));
    svg.appendChild(svgEl('line', { x1: PAD.left, y1: PAD.top, x2: PAD.left, y2: base, class: 'axis' }));
    for (const [side, levels] of [['bids', bids], ['asks', asks]]) {
      if (!levels.length) continue;
      const points = levels.map(([p, c]) => `${x(p).toFixed(1)},${y(c).toFixed(1)}`);
      const edge = `${x(levels[0][0]).toFixed(1)},${base.toFixed(1)}`;
      const end = `${x(levels[levels.length - 1][0]).toFixed(1)},${base.toFixed(1)}`;
      svg.appendChild(svgEl('polygon', { points: [edge, ...points, end].join(' '), class: side + ' area' }));
      svg.appendChild(svgEl('polyline', { points: points.join(' '), class: side + ' line', 'data-levels': levels.length }));
    }
    const digits = decimals((book.bids[0] || book.asks[0])[0]);
    svg.appendChild(svgText(PAD.left, H - 8, lo.toFixed(digits), 'start', 'label'));
    svg.appendChild(svgText(W - PAD.right, H - 8, hi.toFixed(digits), 'end', 'label'));
    svg.appendChild(svgText(PAD.left - 6, PAD.top + 10, volumeFormat.format(top), 'end', 'label'));
    svg.appendChild(svgText(PAD.left - 6, base, '0', 'end', 'label'));

    const bid = book.bids.length ? book.bids[0][0] : '';
    const ask = book.asks.length ? book.asks[0][0] : '';
    setText($('#best-bid'), bid || '—');
    setText($('#best-ask'), ask || '—');
    setText($('#spread'), bid && ask ? (+ask - +bid).toFixed(Math.max(decimals(bid), decimals(ask))) : '—');
    setText($('#levels'), `${book.bids.length} bids, ${book.asks.length} asks`);
    setText($('#book-age'), age(book.timestamp));
    if (bid && ask) {
      const m = x((+bid + +ask) / 2);
      svg.appendChild(svgEl('line', { x1: m, y1: PAD.top, x2: m, y2: base, class: 'mid' }));
      svg.appendChild(svgText(m, H - 8, mid(bid, ask), 'middle', 'label'));
    }
  }

  // ---- wiring ----

  function fromHash() {
    const id = decodeURIComponent(location.hash.slice(1));
    if (id) openPair(id, true);
    else closePair();
  }

  function tick() {
    for (const row of state.rows.values()) ages(row);
    const seen = state.open && state.seen.get(state.open);
    if (seen && seen.book && !state.down.has(state.open)) setText($('#book-age'), age(seen.book));
    status();
  }

  document.addEventListener('DOMContentLoaded', () => {
    for (const th of document.querySelectorAll('#pairs th')) {
      th.tabIndex = 0;
      const sortBy = () => {
        const key = th.dataset.key;
        state.sort = { key, dir: state.sort.key === key ? -state.sort.dir : 1 };
        for (const other of document.querySelectorAll('#pairs th')) other.removeAttribute('aria-sort');
        th.setAttribute('aria-sort', state.sort.dir > 0 ? 'ascending' : 'descending');
        render();
      };
      th.addEventListener('click', sortBy);
      th.addEventListener('keydown', (e) => {
        if (e.key === 'Enter' || e.key === ' ') {
          e.preventDefault();
          sortBy();
        }
      });
    }
    $('#filter').addEventListener('input', render);
    $('#kind').addEventListener('change', render);
    $('#close').addEventListener('click', (e) => {
      e.preventDefault();
      history.replaceState(null, '', location.pathname + location.search);
      closePair();
    });
    window.addEventListener('hashchange', fromHash);
    // Until a pair list has been read (the service has just started, or
    // cannot read the venue), it is asked for again as often as the market.
    const pairsWait = () => (state.pairs.length ? EVERY.pairs : EVERY.market);
    every('pairs', pairsWait, async () => {
      await readPairs();
      if (!state.loops.market) every('market', EVERY.market, readMarket);
      if (state.open === null && location.hash.length > 1) fromHash();
    });
    setInterval(tick, 1000);
  });
})();
