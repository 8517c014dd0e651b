# Sourced by cluster.sh and clusterbench.sh, which run processes on loopback.

# A directory for the run's files, the processes started (pids), and their end with the script.
# A script that sets KEEP_RUN=1 keeps the directory (its logs) when it stops, and says where.
RUN=$(mktemp -d)
pids=()
stop() {
	trap - EXIT INT TERM # once, whether a signal or the end of the script came first
	for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
	wait 2>/dev/null || true
	if [ "${KEEP_RUN:-0}" = 1 ]; then
		echo "Stopped. The logs are kept in $RUN (rm -rf $RUN to remove them)."
	else
		rm -rf "$RUN"
	fi
}
trap stop EXIT INT TERM

# need_nginx installs nginx when it is missing; NAME is the make target to run again.
need_nginx() {
	if ! command -v nginx >/dev/null; then
		echo "nginx is missing: installing it (apt-get)"
		(apt-get update -qq && apt-get install -y -qq nginx) >/dev/null ||
			{ echo "could not install nginx; install it and run make $1 again" >&2; exit 1; }
	fi
}

# nginx_rr_conf DIR LISTEN EXTRA prints an nginx configuration that balances LISTEN round robin
# over the three members on 127.0.0.1:8081-8083, keeping its files under DIR, with EXTRA (more
# proxy directives) in its location.
nginx_rr_conf() {
	local dir=$1 listen=$2 extra=${3:-}
	cat <<CONF
worker_processes 1;
pid $dir/nginx.pid;
error_log $dir/error.log;
events { worker_connections 1024; }
http {
	access_log off;
	client_body_temp_path $dir/body;
	proxy_temp_path $dir/proxy;
	fastcgi_temp_path $dir/fastcgi;
	uwsgi_temp_path $dir/uwsgi;
	scgi_temp_path $dir/scgi;
	upstream marketfeed {
		server 127.0.0.1:8081;
		server 127.0.0.1:8082;
		server 127.0.0.1:8083;
		keepalive 32;
	}
	server {
		listen $listen;
		location / {
			proxy_pass http://marketfeed;
			proxy_http_version 1.1;
			proxy_set_header Connection "";
			proxy_set_header X-Forwarded-For \$proxy_add_x_forwarded_for;
			$extra
		}
	}
}
CONF
}
