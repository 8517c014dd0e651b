#!/usr/bin/env bash
# make ingest-ab OLD=rev NEW=rev: what a change does to the ingest's CPU, judged the only way this
# machine allows: the two builds alternated on one venuesim, so that both meet the same load from
# the rest of the machine. venuesim serves EXTRA more markets (846 pairs by default) with 24,000
# weight a minute; each round runs OLD's marketfeed, then NEW's, with LINES stream lines (1), and
# measures DURATION seconds (60) once every book is stream-fed: CPU share of a core, depth events a
# second, CPU per depth event (all of the process's CPU), peak RSS. ROUNDS rounds (3); compare the
# medians. DEPTH_WINDOW sets venuesim's -depth-window (unset: its default; 50: diffs shaped as the
# venue's recorded ones). About 2 1/2 minutes a run.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
OLD=${OLD:?OLD=rev (the build to compare against)} NEW=${NEW:-HEAD}
EXTRA=${EXTRA:-800} LINES=${LINES:-1} ROUNDS=${ROUNDS:-3} DURATION=${DURATION:-60}
VENUE=127.0.0.1:8521 API=127.0.0.1:8522 OPS=127.0.0.1:8523
GO=${GO:-go}

# build REV NAME builds REV's venuesim and marketfeed into $RUN/NAME.
build() {
	mkdir -p "$RUN/src-$2" "$RUN/$2"
	git archive "$1" | tar -x -C "$RUN/src-$2"
	(cd "$RUN/src-$2" && "$GO" build -o "$RUN/$2/" ./cmd/marketfeed ./cmd/venuesim)
	echo "$2: $(git rev-parse --short "$1")"
}
build "$OLD" old
build "$NEW" new

"$RUN"/new/venuesim -listen $VENUE -extra "$EXTRA" -weight-limit 24000 ${DEPTH_WINDOW:+-depth-window "$DEPTH_WINDOW"} >"$RUN/venuesim.log" 2>&1 &
pids+=($!)
sleep 1

metric() { curl -fsS "http://$OPS/metrics" | awk -v m="$1" '$1 == m { print $2 }'; }
for round in $(seq "$ROUNDS"); do
	for build in old new; do
		"$RUN/$build/marketfeed" -venue binance -venue-url "http://$VENUE" -venue-ws-url "ws://$VENUE" \
			-venue-streams on -venue-ws-lines "$LINES" -rate-limit 0 -listen $API -ops-listen $OPS \
			>"$RUN/marketfeed-$build.log" 2>&1 &
		pid=$!
		pids+=($pid) # stopped with the script if it is interrupted
		for _ in $(seq 300); do
			sleep 1
			[ "$(metric marketfeed_books_sync_eta_seconds 2>/dev/null || true)" = 0 ] && break
		done
		sleep 5
		depth='marketfeed_stream_events_total{kind="depth"}'
		e0=$(metric "$depth") c0=$(awk '{ print $14 + $15 }' /proc/$pid/stat) t0=$(date +%s.%N)
		sleep "$DURATION"
		e1=$(metric "$depth") c1=$(awk '{ print $14 + $15 }' /proc/$pid/stat) t1=$(date +%s.%N)
		hwm=$(awk '/VmHWM/ { print $2 }' /proc/$pid/status)
		kill $pid
		wait $pid 2>/dev/null || true
		awk -v b=$build -v r="$round" -v t0="$t0" -v t1="$t1" -v c0="$c0" -v c1="$c1" -v e0="$e0" -v e1="$e1" \
			-v hz="$(getconf CLK_TCK)" -v hwm="$hwm" 'BEGIN {
			dt = t1 - t0; s = (c1 - c0) / hz; ev = e1 - e0
			printf "round %d  %-3s  CPU %5.1f %% of a core  %6.0f depth events/s  %6.2f µs an event  peak RSS %.0f MiB\n",
				r, b, 100 * s / dt, ev / dt, 1e6 * s / ev, hwm / 1024
		}'
	done
done
