#!/usr/bin/env bash
# make cluster-bench: three marketfeed members behind nginx round robin, on one NATS server, against
# venuesim with Binance's weights and EXTRA more markets (446 pairs by default), all on loopback. An
# aggregator reads every pair's book and trades, and /contracts and /contract_specs, through nginx
# every 10 s, beside a hot client; the script waits for a warm cluster, then measures the steady
# state, a leader killed with SIGKILL, the NATS server killed for 40 s, and clients sending 900
# requests evenly over a minute and 1,200 a minute for 4 minutes through the balancer. It prints every figure: answers and book age per phase,
# replication lag, the venue's weight, a new leader's fullest window and weight by purpose after each
# takeover, rate-limit overshoot, CPU and RSS per member. About 20
# minutes. PROFILE=DIR also writes 30 s CPU profiles of the leader, a follower and the process alone,
# taken in the steady minute, to DIR.
#
# A fourth marketfeed, alone (no -cluster), reads a venuesim of its own (same markets: the simulated
# prices follow the wall clock; its own weight, so it does not count against the cluster's) and is
# read by the same aggregator and hot client through its own address in the steady minute: what one
# process costs, measured on the same machine at the same moment, beside each member's cost.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
BIN=${BIN:-bin}
EXTRA=${EXTRA:-400}
need_nginx cluster-bench

NATS=127.0.0.1:4333 VENUE=127.0.0.1:8511 LB=127.0.0.1:8090
ALONE_VENUE=127.0.0.1:8512 ALONE=127.0.0.1:8084
AGG=10.9.9.9 CLIENT=10.1.1.1 EVEN=10.1.1.2 # the addresses the clients say nginx got them from
start_nats() { "$BIN"/nats-server -js -a 127.0.0.1 -p 4333 -sd "$RUN/nats" >>"$RUN/nats.log" 2>&1 & nats_pid=$!; pids+=($nats_pid); }
start_nats
"$BIN"/venuesim -listen $VENUE -extra "$EXTRA" >"$RUN/venuesim.log" 2>&1 & pids+=($!)
"$BIN"/venuesim -listen $ALONE_VENUE -extra "$EXTRA" >"$RUN/venuesim-alone.log" 2>&1 & alone_venue=$!; pids+=($!)
sleep 1
declare -A member_pid
"$BIN"/marketfeed -venue binance -venue-url http://$ALONE_VENUE -listen $ALONE -ops-listen 127.0.0.1:9084 \
	-trusted-proxies 127.0.0.1/32 -ratelimit-exempt $AGG/32 >"$RUN/alone.log" 2>&1 & member_pid[alone]=$!; pids+=($!)
for i in 1 2 3; do
	"$BIN"/marketfeed -venue binance -venue-url http://$VENUE -listen 127.0.0.1:808$i -ops-listen 127.0.0.1:908$i \
		-cluster nats://$NATS -cluster-member "member-$i" -trusted-proxies 127.0.0.1/32 -ratelimit-exempt $AGG/32 \
		>"$RUN/member-$i.log" 2>&1 & member_pid[$i]=$!; pids+=($!)
done
mkdir -p "$RUN/nginx"
nginx_rr_conf "$RUN/nginx" $LB >"$RUN/nginx/nginx.conf"
nginx -c "$RUN/nginx/nginx.conf" -g 'daemon off;' & pids+=($!)

metric() { curl -s "127.0.0.1:908$1/metrics" | awk -v m="$2" '$1 == m { print $2 }'; }
leader() { for i in 1 2 3; do if curl -s "127.0.0.1:908$i/readyz" 2>/dev/null | grep -q '"role":"leader"'; then echo $i; fi; done | head -1; }
weight() { curl -s "$VENUE/_control/stats" | grep -o '"used_weight":[0-9]*' | cut -d: -f2 || true; }
roles() { for i in 1 2 3; do curl -s "127.0.0.1:908$i/readyz" | grep -o '"role":"[a-z]*"' || echo -n "member-$i down "; done | tr '\n' ' '; }
name() { if [ "$1" = alone ]; then echo "alone"; else echo "member-$1"; fi; }
ticks() { local st; read -r -a st <"/proc/$1/stat"; echo $(( st[13] + st[14] )); } # user + system CPU of a pid
usage() { # CPU seconds and RSS (MB) of each member and of the process alone
	for i in 1 2 3 ${member_pid[alone]:+alone}; do
		pid=${member_pid[$i]}
		[ -d /proc/$pid ] || { echo -n "$(name $i) gone; "; continue; }
		echo -n "$(name $i) cpu $(( $(ticks "$pid") / $(getconf CLK_TCK) ))s rss $(( $(awk '/VmRSS/ {print $2}' /proc/$pid/status) / 1024 ))MB; "
	done
	echo
}
declare -A ticks0
spent_from() { for i in 1 2 3 alone; do ticks0[$i]=$(ticks "${member_pid[$i]}"); done; }
# spent prints the CPU seconds each member and the process alone used since spent_from, and the
# leader's over the process alone's.
spent() {
	local l=$1 hz i; hz=$(getconf CLK_TCK)
	for i in 1 2 3 alone; do
		echo -n "$(name $i)$([ "$i" = "$l" ] && echo " (leader)") $(awk -v t=$(( $(ticks "${member_pid[$i]}") - ticks0[$i] )) -v hz="$hz" 'BEGIN { printf "%.2f", t / hz }')s; "
	done
	echo
	awk -v a=$(( $(ticks "${member_pid[$l]}") - ticks0[$l] )) -v b=$(( $(ticks "${member_pid[alone]}") - ticks0[alone] )) \
		'BEGIN { printf "leader over the process alone: %.2f\n", (b > 0 ? a / b : 0) }'
}
phase() { echo; echo "== $*"; }
# same_contracts: every member still running serves the same /contracts and
# /contract_specs (a publication a second): the others answer 304 to the
# leader's ETag, tried until all are read within one publication. Then how
# many contracts carry an open interest.
same_contracts() {
	l=$(leader)
	# A killed member is gone from the cluster though not yet reaped: the
	# members are those whose operator listener answers.
	others=$(for i in 1 2 3; do if [ "$i" != "$l" ] && curl -s -o /dev/null "127.0.0.1:908$i/readyz"; then echo -n "$i "; fi; done)
	for route in contracts contract_specs; do
		verdict="members differ in 20 tries"
		for _ in $(seq 1 20); do
			etag=$(curl -s -D - -o /dev/null "127.0.0.1:808$l/api/public/$route" | awk 'tolower($1) == "etag:" { print $2 }' | tr -d '\r' || true)
			codes=$(for i in $others; do curl -s -o /dev/null -w '%{http_code} ' -H "If-None-Match: $etag" "127.0.0.1:808$i/api/public/$route" || true; done)
			if [ -n "$etag" ] && [ -z "${codes//304 /}" ]; then verdict="members $others answer 304 to the leader's (member-$l) ETag $etag"; break; fi
			sleep 0.2
		done
		echo "/$route: $verdict"
	done
	echo "contracts with an open interest: $(curl -s "127.0.0.1:808$l/api/public/contracts" | grep -o '"open_interest":"' | wc -l || true) of $(curl -s "127.0.0.1:808$l/api/public/contract_specs" | grep -o '"ticker_id"' | wc -l || true)"
}
sweep() { "$BIN"/clusterbench sweep -targets http://$LB -xff $AGG -venue http://$VENUE "$@"; }
# Each member's venue weight window (marketfeed_venue_weight_spent: its own reads and what the venue
# counted for the address beyond them) every 2 s, and its weight by purpose: what a new leader finds
# in the window when it takes over, and what it spends it on. The process alone (4: its operator
# listener is 9084) is read as often, so that the scrapes cost it what they cost the members.
( while :; do for i in 1 2 3 4; do v=$(metric $i marketfeed_venue_weight_spent || true); [ -z "$v" ] || echo "$(date +%s) $i $v"; done; sleep 2; done ) \
	>"$RUN/windows" 2>/dev/null & pids+=($!)
fullest() { awk -v m="$1" -v t="$2" '$2 == m && $1 >= t && $3 > max { max = $3 } END { print max + 0 }' "$RUN/windows"; } # member, since
# window_report MEMBER SINCE: MEMBER's fullest window since SINCE (epoch seconds) against its budget,
# and its weight by purpose since its poller started: its term, for a member that took over.
window_report() {
	echo "member-$1's window at its fullest since then: $(fullest "$1" "${2%.*}") of $(metric "$1" marketfeed_venue_weight_budget);" \
		"its weight this term, by purpose: $(curl -s "127.0.0.1:908$1/metrics" | awk -F'[" ]' '/^marketfeed_venue_weight_total\{/ && $NF > 0 { printf "%s %d, ", $2, $NF }' | sed 's/, $//' || true)"
}

phase "warming up: every book and trade list stream-fed on the leader, every follower's streams live"
began=$(date +%s)
while :; do
	l=$(leader)
	if [ -n "$l" ]; then
		n=$(curl -s "127.0.0.1:908$l/readyz" | grep -o '"books":{[^}]*}' || true)
		listed=$(metric "$l" 'marketfeed_pairs{part="books",source="stream"}')
		live=$(for i in 1 2 3; do [ "$i" = "$l" ] || metric $i 'marketfeed_standby_streams_live{stream="depth"}'; done | tr '\n' ' ')
		echo "t+$(( $(date +%s) - began ))s leader member-$l $n followers' live depth streams: $live"
		alone=$(curl -s 127.0.0.1:9084/metrics | awk '$1 == "marketfeed_pairs{part=\"books\",source=\"stream\"}" { print $2 }')
		echo "  the process alone: ${alone:-0} books stream-fed"
		[ "${listed:-0}" -ge $((EXTRA + 40)) ] && [ "$live" = "$listed $listed " ] && [ "${alone:-0}" -ge $((EXTRA + 40)) ] && break
	fi
	sleep 10
done

phase "steady state: aggregator every 10 s through nginx for 60 s, a hot client on BTC_USDT; the same at the process alone"
hot() { while :; do curl -s -o /dev/null -H "X-Forwarded-For: $AGG" "http://$1/api/public/orderbook?ticker_id=BTC_USDT"; sleep 0.1; done; }
hot $LB & hot=$!; pids+=($hot)
hot $ALONE & hot_alone=$!; pids+=($hot_alone)
usage >"$RUN/usage0"; w0=$(weight); l=$(leader); spent_from
"$BIN"/clusterbench sweep -targets http://$ALONE -xff $AGG -venue http://$ALONE_VENUE -rounds 6 >"$RUN/sweep-alone" & agg_alone=$!
if [ -n "${PROFILE:-}" ]; then # 30 s CPU profiles of the leader, a follower and the process alone
	mkdir -p "$PROFILE"
	f=$(for i in 1 2 3; do [ "$i" = "$l" ] || echo "$i"; done | head -1)
	for p in "leader 908$l" "follower 908$f" "alone 9084"; do
		set -- $p; curl -s -o "$PROFILE/$1.pprof" "http://127.0.0.1:$2/debug/pprof/profile?seconds=30" &
	done
fi
sweep -rounds 6
wait $agg_alone
echo "the process alone, same sweep:"; tail -n 1 "$RUN/sweep-alone"
echo "CPU and RSS at the start: $(cat "$RUN/usage0")"; echo "CPU and RSS after 60 s:   $(usage)"
echo "CPU seconds over the steady phase: $(spent "$l")"
# The process alone is done: the phases that follow load the cluster as they did without it.
kill "$hot_alone" "${member_pid[alone]}" "$alone_venue" 2>/dev/null || true
wait "$hot_alone" "${member_pid[alone]}" "$alone_venue" 2>/dev/null || true
unset 'member_pid[alone]' 
echo "venue weight used this minute, all members together: $(weight) (before: $w0; Binance's limit 2400)"
"$BIN"/clusterbench lag -targets http://127.0.0.1:9081,http://127.0.0.1:9082,http://127.0.0.1:9083
same_contracts

phase "the leader killed with SIGKILL; the aggregator goes on for 90 s"
l=$(leader); kill -9 "${member_pid[$l]}"; killed=$(date +%s.%N); echo "killed member-$l"
sweep -rounds 9 & agg=$!
for _ in $(seq 1 300); do [ -n "$(leader)" ] && break; sleep 0.1; done
echo "member-$(leader) leads $(awk -v a="$(date +%s.%N)" -v b="$killed" 'BEGIN { printf "%.1f", a - b }') s after the kill"
wait $agg
window_report "$(leader)" "$killed"
echo "venue weight used this minute: $(weight)"
same_contracts

phase "the NATS server killed for 40 s, then started again; the aggregator goes on for 100 s"
sweep -rounds 10 & agg=$!
sleep 5; kill -9 "$nats_pid"; echo "NATS killed"
sleep 15; echo "roles 15 s later: $(roles)"
sleep 25; start_nats; back=$(date +%s); echo "NATS started again"
wait $agg
echo "roles: $(roles)"
window_report "$(leader)" "$back"

kill "$hot" 2>/dev/null || true
phase "one client sends 900 requests evenly over 60 s through nginx (the limit is 600 in any minute)"
"$BIN"/clusterbench rate -targets http://$LB -xff $EVEN -per-minute 900 -for 60s

phase "one client sends 1,200 requests a minute through nginx for 4 minutes (the limit is 600 in any minute)"
"$BIN"/clusterbench rate -targets http://$LB -xff $CLIENT -per-minute 1200 -for 4m
echo; echo "CPU and RSS at the end: $(usage)"
