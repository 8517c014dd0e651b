// A typed consumer of the public API, written as an aggregator writes one on
// the types openapi-typescript generates from docs/openapi.yaml and
// docs/openapi-ops.yaml. `make openapi-ts` generates them next to this file
// and compiles it with tsc --strict, so a document change that breaks such a
// consumer fails `make test`.
import type { components, operations, paths } from "./openapi";
import type { components as opsComponents } from "./openapi-ops";

type Schemas = components["schemas"];
type Reads = { [P in keyof paths]: paths[P]["get"] };

/** The body of a read's 200 answer. */
export type Body<P extends keyof paths> = Reads[P]["responses"][200]["content"]["application/json"];

/** A read's query, as the document declares it. */
export type Query<P extends keyof paths> = NonNullable<Reads[P]["parameters"]["query"]>;

/** Every error body the API sends. */
export type ErrorBody = Schemas["Error"] | Schemas["RateLimitError"] | Schemas["UnknownTickerError"];

export class APIError extends Error {
  constructor(
    readonly status: number,
    readonly body: ErrorBody,
    readonly retryAfter: number | undefined,
  ) {
    super(describe(body));
  }
}

/**
 * read fetches one route of the API at base (its origin). The browser or the
 * runtime negotiates compression; If-None-Match is the one header the API
 * reads.
 */
export async function read<P extends keyof paths>(
  base: string,
  path: P,
  ...query: Query<P> extends never ? [] : [Query<P>]
): Promise<Body<P>> {
  const url = new URL(path, base);
  for (const [name, value] of Object.entries(query[0] ?? {})) {
    if (value !== undefined) url.searchParams.set(name, String(value));
  }
  const resp = await fetch(url);
  if (resp.ok) return (await resp.json()) as Body<P>;
  const retryAfter = resp.headers.get("Retry-After");
  throw new APIError(resp.status, (await resp.json()) as ErrorBody, retryAfter === null ? undefined : Number(retryAfter));
}

/** describe says what went wrong, for every error the API has. */
export function describe(e: ErrorBody): string {
  if ("error" in e) return `not a listed pair: ${e.message}`;
  switch (e.code) {
    case "VALIDATION_ERROR":
    case "BAD_REQUEST":
    case "REQUEST_TIMEOUT":
    case "BODY_TOO_LARGE":
    case "HEADERS_TOO_LARGE":
    case "NOT_FOUND":
    case "METHOD_NOT_ALLOWED":
      return `a bad request: ${e.message}`;
    case "RATE_LIMITED":
    case "OVERLOADED":
      return `retry later: ${e.message}`;
    case "INTERNAL":
    case "UPSTREAM_UNAVAILABLE":
      return `the service failed: ${e.message}`;
    default: {
      const unhandled: never = e.code;
      return unhandled;
    }
  }
}

/** Mid prices by pair, from the tickers. */
export async function mids(base: string): Promise<Map<string, Schemas["Decimal"]>> {
  const tickers = await read(base, "/api/public/tickers");
  return new Map(tickers.map((t) => [t.ticker_id, t.bid]));
}

/** The best bid of a pair: a level is exactly [price, size]. */
export async function bestBid(base: string, id: Schemas["TickerId"]): Promise<{ price: string; size: string } | undefined> {
  const book = await read(base, "/api/public/orderbook", { ticker_id: id, depth: 1 });
  const best = book.bids[0];
  if (best === undefined) return undefined;
  const [price, size] = best;
  return { price, size };
}

/** The newest trades of one side. */
export async function lastTrades(base: string, id: Schemas["TickerId"], side: Schemas["Side"]): Promise<Schemas["Trade"][]> {
  const trades = await read(base, "/api/public/historical_trades", { ticker_id: id, type: side, limit: 10 });
  return trades.filter((t) => t.type === side);
}

/** Each perpetual's funding rate (percent per interval) and when it is settled. */
export async function fundingRates(base: string): Promise<Map<string, { rate: Schemas["Decimal"]; at: Date }>> {
  const contracts = await read(base, "/api/public/contracts");
  return new Map(contracts.map((c) => [c.ticker_id, { rate: c.funding_rate, at: new Date(c.next_funding_rate_timestamp) }]));
}

/** Open interest in dollars by pair, for the contracts whose count has been read and whose quote is a dollar. */
export async function openInterestUSD(base: string): Promise<Map<string, Schemas["Decimal"]>> {
  const contracts = await read(base, "/api/public/contracts");
  const usd = new Map<string, Schemas["Decimal"]>();
  for (const c of contracts) {
    if (c.open_interest_usd !== null) usd.set(c.ticker_id, c.open_interest_usd);
  }
  return usd;
}

/** The price of one contract by pair, with its currency, from the specifications. */
export async function contractPrices(base: string): Promise<Map<string, { price: Schemas["Decimal"]; currency: string }>> {
  const specs = await read(base, "/api/public/contract_specs");
  return new Map(specs.map((s) => [s.ticker_id, { price: s.contract_price, currency: s.contract_price_currency }]));
}

/** The spot pairs' ids. */
export async function spotPairs(base: string): Promise<string[]> {
  const pairs = await read(base, "/api/public/pairs");
  return pairs.filter((p) => p.kind === "spot").map((p) => `${p.base}_${p.target}`);
}

/** How many pairs the market streams feed, from the operator listener's readiness. */
export function streamed(r: opsComponents["schemas"]["Readiness"]): number {
  return r.sources === undefined ? 0 : r.sources.books.stream + r.sources.trades.stream;
}

// What the document must promise for such a consumer to work, checked on
// the generated types: each alias below fails to compile when it does not
// hold, naming the offending header or body.
type Holds<T extends never> = T;
type Operation = operations[keyof operations];

// A header the HTTP client manages itself, and a browser forbids scripts to
// set, is no parameter: a Go client that sets Accept-Encoding loses its
// transparent decompression.
type HeaderOf<O> = O extends { parameters: { header?: infer H } } ? (H extends object ? Extract<keyof H, string> : never) : never;
type ClientManaged = "accept-encoding" | "connection" | "content-length" | "host" | "cookie" | "origin";
export type NoClientManagedHeader = Holds<Extract<Lowercase<HeaderOf<Operation>>, ClientManaged>>;

// A HEAD answer has no body, so no HEAD operation may declare one.
type BodiesOf<O> = O extends { responses: infer R }
  ? { [S in keyof R]: R[S] extends { content: infer C } ? keyof C : never }[keyof R]
  : never;
type HeadOperation = { [P in keyof paths]: paths[P] extends { head: infer H } ? H : never }[keyof paths];
export type NoBodyOnHead = Holds<BodiesOf<HeadOperation>>;
