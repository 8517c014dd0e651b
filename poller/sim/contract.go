package sim

import (
	"context"

	"marketfeed/poller/venue"
)

// Perpetual contract data: mark price, index price, funding and open
// interest, as pure functions of the seed, the market and the instant, like
// everything else the venue answers.
//
//   - The mark price is the mid of the book's top at the instant's
//     heartbeat, printed with two more decimals than the market's prices
//     (a mid can fall between ticks, and the venue prints marks finer than
//     its tick).
//   - The index price is the mark less a basis of at most ±150 parts per
//     million, which drifts over about a minute; the estimated settle price
//     is the index at the start of the minute, a smoothed index as the
//     venue's is.
//   - The funding rate is a fraction per 8 h interval, 0.0001 on average,
//     drifting over hours between -0.00002 and 0.00022: now and then a
//     market's longs are paid.
//   - The next funding is at the next 00:00, 08:00 or 16:00 UTC.
//   - Open interest is about a third of the market's typical day of volume,
//     drifting ±10 % over hours; never below one lot.

// Hash domains of the contract data.
const (
	domainBasis    = 0x6261736973
	domainFunding  = 0x66756e64
	domainInterest = 0x6f69
)

// fundingInterval is the venue's funding period, in ms; funding is paid at
// 00:00, 08:00 and 16:00 UTC, and the epoch is a midnight.
const fundingInterval = 8 * 3600 * 1000

// Decimals of the contract values as printed.
const (
	markExtraDecimals = 2 // beyond the market's price decimals
	fundingDecimals   = 8 // as the venue prints rates: "0.00010000"
)

var _ venue.ContractReader = (*Venue)(nil)

// ContractsWeight returns 0: the simulator has no weight limit.
func (v *Venue) ContractsWeight() int { return 0 }

// OpenInterestWeight returns 0: the simulator has no weight limit.
func (v *Venue) OpenInterestWeight() int { return 0 }

// Contracts returns the mark price, index and funding of every tradable
// perpetual at the current instant, in catalog order, as premiumIndex does
// for all symbols. Every row is usable: invalid is always 0.
func (v *Venue) Contracts(ctx context.Context) ([]venue.Contract, int, error) {
	if err := ctx.Err(); err != nil {
		return nil, 0, err
	}
	return v.ContractsAt(v.now().UnixMilli()), 0, nil
}

// ContractsAt returns what Contracts returns at the instant ms (ms since
// the Unix epoch): the rows a mark price stream sends at that instant.
// Dated futures and delisted perpetuals have no funding and are left out.
func (v *Venue) ContractsAt(ms int64) []venue.Contract {
	out := make([]venue.Contract, 0, len(v.markets))
	w := text{buf: make([]byte, 0, len(v.markets)*64)}
	for i := range v.markets {
		m := &v.markets[i]
		if !m.info.Perpetual || !m.info.Trading {
			continue
		}
		mark, index, settle := m.marks(ms)
		dec := m.priceDec + markExtraDecimals
		w.decimal(mark, dec)
		w.decimal(index, dec)
		w.decimal(settle, dec)
		w.decimal(m.funding(ms), fundingDecimals)
		out = append(out, venue.Contract{Symbol: m.info.Symbol, NextFunding: nextFunding(ms), Time: ms})
	}
	c := cutter{string(w.buf)}
	for i := range out {
		r := &out[i]
		r.MarkPrice, r.IndexPrice, r.SettlePrice, r.FundingRate = c.next(), c.next(), c.next(), c.next()
	}
	return out
}

// OpenInterest returns the open interest of symbol at the current instant,
// in base units. Any listed market has one, as on the venue; an unknown
// symbol is a 400 StatusError.
func (v *Venue) OpenInterest(ctx context.Context, symbol string) (venue.OpenInterest, error) {
	if err := ctx.Err(); err != nil {
		return venue.OpenInterest{}, err
	}
	m, err := v.market("openInterest", symbol)
	if err != nil {
		return venue.OpenInterest{}, err
	}
	ms := v.now().UnixMilli()
	return venue.OpenInterest{Symbol: symbol, Amount: decimalString(m.openInterest(ms), m.qtyDec), Time: ms}, nil
}

// marks returns the mark, index and estimated settle prices at ms, in
// units of 10^-(priceDec+markExtraDecimals).
func (m *market) marks(ms int64) (mark, index, settle int64) {
	mark = m.mark(ms)
	index = m.index(mark, ms)
	minute := floorDiv(ms, 60_000) * 60_000
	settle = m.index(m.mark(minute), minute)
	return mark, index, settle
}

// mark is the mid of the top of the book at ms.
func (m *market) mark(ms int64) int64 {
	bid, ask := m.top(floorDiv(ms, tickMs))
	return (bid + ask) * m.tick * pow10(markExtraDecimals) / 2
}

// index is mark less the basis at ms, which stays within ±150 ppm.
func (m *market) index(mark, ms int64) int64 {
	ppm := 150 * wave(mix(m.topKey^domainBasis), 16, ms) >> 15
	return max(mark-mark*ppm/1_000_000, 1)
}

// funding is the funding rate at ms in units of 10^-fundingDecimals:
// 0.0001 on average, ±0.00012 over knots about 70 minutes apart.
func (m *market) funding(ms int64) int64 {
	return 10_000 + 12_000*wave(mix(m.topKey^domainFunding), 22, ms)>>15
}

// nextFunding is the first funding time after ms.
func nextFunding(ms int64) int64 {
	return (floorDiv(ms, fundingInterval) + 1) * fundingInterval
}

// openInterest is the open interest at ms, in lots.
func (m *market) openInterest(ms int64) int64 {
	return max(m.dayLots*(3_300+330*wave(mix(m.volumeKey^domainInterest), 23, ms)>>15)/10_000, 1)
}
