#!/usr/bin/env bash
# make cluster: a NATS server (built from the module, JetStream in memory), venuesim with
# Binance's weights, three marketfeed members and nginx as a round-robin balancer in front of
# them, all on loopback. Prints where to look; Ctrl-C stops everything and keeps the logs.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
KEEP_RUN=1
BIN=${BIN:-bin}
need_nginx cluster

"$BIN"/nats-server -js -a 127.0.0.1 -p 4222 -sd "$RUN/nats" >"$RUN/nats.log" 2>&1 & pids+=($!)
"$BIN"/venuesim -listen 127.0.0.1:8500 >"$RUN/venuesim.log" 2>&1 & pids+=($!)
sleep 1
for i in 1 2 3; do
	"$BIN"/marketfeed -venue binance -venue-url http://127.0.0.1:8500 \
		-listen 127.0.0.1:808$i -ops-listen 127.0.0.1:908$i \
		-cluster nats://127.0.0.1:4222 -cluster-member "member-$i" \
		-spot BTC_USDT,ETH_USDT,SOL_USDT -trusted-proxies 127.0.0.1/32 >"$RUN/member-$i.log" 2>&1 & pids+=($!)
done

mkdir -p "$RUN/nginx"
nginx_rr_conf "$RUN/nginx" 127.0.0.1:8080 "proxy_next_upstream error timeout http_502;" >"$RUN/nginx/nginx.conf"
nginx -c "$RUN/nginx/nginx.conf" -g 'daemon off;' & pids+=($!)

for _ in $(seq 1 100); do
	leader=$(for i in 1 2 3; do curl -sf "127.0.0.1:908$i/readyz" 2>/dev/null | grep -o '"leader":"[^"]*"' || true; done | head -1)
	[ -n "$leader" ] && break
	sleep 0.2
done
cat <<TEXT

A cluster of three marketfeed members is running, ${leader:-no leader yet}:

  http://127.0.0.1:8080/api/public/pairs      nginx, round robin over the members
  http://127.0.0.1:808{1,2,3}/api/public/...  each member
  http://127.0.0.1:908{1,2,3}/readyz          role, term, leader; /metrics: marketfeed_cluster_*
  nats://127.0.0.1:4222                       NATS with JetStream; venuesim on 127.0.0.1:8500

Kill the leader (kill -9 \$(pgrep -f 'member-N')) and watch another take over: the followers
find no one answering its term and a new leader comes in about half a second (0.6 s in make
cluster-bench), well within the lease's 5 s TTL.
Logs are in $RUN (member-{1,2,3}.log, venuesim.log, nats.log); Ctrl-C stops everything and
keeps them there.
TEXT
wait
