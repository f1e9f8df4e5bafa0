#!/bin/sh
# failover-pair.sh: a PostgreSQL primary and its streaming standby on this
# machine, for `wsctl bench team --failover-command` (see bench/README.md).
#
#   scripts/failover-pair.sh up DIR [PORT_PRIMARY PORT_STANDBY] [sync|async]
#       initdb a primary in DIR/a, pg_basebackup a standby of it in DIR/b,
#       start both (synchronous replication unless async), and print the
#       clients' DSN: both hosts, the read-write one wanted.
#   scripts/failover-pair.sh failover DIR
#       crash the primary (pg_ctl stop -m immediate: no shutdown checkpoint,
#       its clients' connections cut) and promote the standby.
#   scripts/failover-pair.sh down DIR
#       stop both and remove DIR.
#
# Run as root, the clusters run as the user postgres. The binaries come from
# pg_config --bindir or the newest /usr/lib/postgresql/*/bin.
set -eu

bindir() {
	if command -v pg_config >/dev/null 2>&1 && [ -x "$(pg_config --bindir)/pg_basebackup" ] && [ -x "$(pg_config --bindir)/initdb" ]; then
		pg_config --bindir
		return
	fi
	for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -rV); do
		if [ -x "$d/initdb" ] && [ -x "$d/pg_basebackup" ]; then
			echo "$d"
			return
		fi
	done
	echo "failover-pair.sh: no initdb and pg_basebackup (install the PostgreSQL server)" >&2
	exit 1
}

# as runs a command as the clusters' user.
as() {
	if [ "$(id -u)" = 0 ]; then
		runuser -u postgres -- "$@"
	else
		"$@"
	fi
}

conf() { # conf DATADIR PORT SOCKETDIR
	cat >>"$1/postgresql.conf" <<CONF

port = $2
listen_addresses = '127.0.0.1'
unix_socket_directories = '$3'
max_connections = 300
shared_buffers = '128MB'
max_wal_senders = 4
hot_standby = on
wal_keep_size = '256MB'
logging_collector = off
CONF
}

cmd=${1:-}
dir=${2:-}
[ -n "$cmd" ] && [ -n "$dir" ] || { sed -n '2,18p' "$0" >&2; exit 2; }
bin=$(bindir)

case "$cmd" in
up)
	pa=${3:-54321}
	pb=${4:-54322}
	mode=${5:-sync}
	mkdir -p "$dir"
	[ "$(id -u)" = 0 ] && chown postgres: "$dir"
	as "$bin/initdb" -D "$dir/a" -U postgres -A trust --no-instructions >"$dir/initdb.log"
	conf "$dir/a" "$pa" "$dir"
	as "$bin/pg_ctl" -D "$dir/a" -l "$dir/a.log" -w -t 60 start >/dev/null
	as "$bin/psql" -h 127.0.0.1 -p "$pa" -U postgres -qc "CREATE DATABASE test" postgres
	as "$bin/pg_basebackup" -h 127.0.0.1 -p "$pa" -U postgres -D "$dir/b" -R -X stream -c fast
	conf "$dir/b" "$pb" "$dir"
	as "$bin/pg_ctl" -D "$dir/b" -l "$dir/b.log" -w -t 60 start >/dev/null
	if [ "$mode" = sync ]; then
		as "$bin/psql" -h 127.0.0.1 -p "$pa" -U postgres -qc "ALTER SYSTEM SET synchronous_standby_names = '*'" -c "SELECT pg_reload_conf()" postgres >/dev/null
	fi
	want=async
	[ "$mode" = sync ] && want=sync
	i=0
	until [ "$(as "$bin/psql" -h 127.0.0.1 -p "$pa" -U postgres -Atc "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming' AND sync_state = '$want'" postgres)" -gt 0 ]; do
		i=$((i + 1))
		[ $i -lt 600 ] || { echo "failover-pair.sh: the standby never streamed" >&2; exit 1; }
		sleep 0.1
	done
	echo "$pa" >"$dir/primary.port"
	echo "postgres://postgres@127.0.0.1:$pa,127.0.0.1:$pb/test?sslmode=disable&target_session_attrs=read-write&connect_timeout=2"
	;;
failover)
	as "$bin/pg_ctl" -D "$dir/a" -m immediate -w stop >/dev/null
	as "$bin/pg_ctl" -D "$dir/b" -w -t 60 promote >/dev/null
	echo "failover-pair.sh: primary crashed, standby promoted"
	;;
down)
	as "$bin/pg_ctl" -D "$dir/a" -m immediate stop >/dev/null 2>&1 || true
	as "$bin/pg_ctl" -D "$dir/b" -m immediate stop >/dev/null 2>&1 || true
	rm -rf "$dir"
	;;
*)
	sed -n '2,18p' "$0" >&2
	exit 2
	;;
esac
