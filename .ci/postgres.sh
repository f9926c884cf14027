#!/usr/bin/env bash
# Throwaway PostgreSQL cluster for the store tests (Debian, run as root).
#
#   .ci/postgres.sh [start]   install PostgreSQL if missing, create or reuse the
#                             cluster, start it, and print the test variables as
#                             `export NAME='value'` lines (eval-able)
#   source .ci/postgres.sh    the same, exporting the variables into the shell
#   .ci/postgres.sh stop      stop the cluster (its files stay for reuse)
#   .ci/postgres.sh destroy   stop the cluster and delete its files
#
# Two clusters are made: the main one ($SCARPG_DIR/data, port $SCARPG_PORT)
# that every PostgreSQL test shares, and a second one ($SCARPG_DIR/outage,
# port $SCARPG_PORT+1) that only the store's outage test stops and starts, so
# that test never pulls the database from under tests of other packages
# running at the same time (go test ./... runs packages in parallel).
#
# Settings (environment): SCARPG_DIR (default /tmp/scarpg), SCARPG_PORT
# (default 55432). The clusters listen on 127.0.0.1 only, with trust
# authentication, fsync off: never use them for anything but tests.
#
# Variables produced:
#   SCARPROXY_TEST_POSTGRES_DSN  DSN of database scarproxy_test (main cluster)
#   SCARPROXY_TEST_PGCTL         command prefix running pg_ctl, as the clusters'
#                                owner, on the outage cluster (append stop/start)
#   SCARPROXY_TEST_PGCTL_DSN     DSN of database scarproxy_test on that cluster

scarpg_main() (
	set -euo pipefail

	local dir="${SCARPG_DIR:-/tmp/scarpg}"
	local port="${SCARPG_PORT:-55432}"
	local cmd="${1:-start}"

	log() { echo "postgres.sh: $*" >&2; }

	find_bin() {
		local d
		d=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
		if [[ -n "$d" && -x "$d/initdb" && -x "$d/pg_ctl" ]]; then
			echo "$d"
		fi
	}

	local bin
	bin=$(find_bin)
	if [[ -z "$bin" ]]; then
		[[ "$cmd" == start ]] || { log "PostgreSQL is not installed"; return 0; }
		log "installing PostgreSQL"
		export DEBIAN_FRONTEND=noninteractive
		apt-get update >&2
		apt-get install -y postgresql >&2
		bin=$(find_bin)
		[[ -n "$bin" ]] || { log "no initdb under /usr/lib/postgresql/*/bin after install"; return 1; }
	fi

	# Run the server tools as the owner of the clusters: `postgres` when root.
	local -a as=()
	local owner
	owner=$(id -un)
	if [[ $(id -u) -eq 0 ]]; then
		id postgres >/dev/null 2>&1 || { log "user postgres missing (install the postgresql package)"; return 1; }
		as=(runuser -u postgres --)
		owner=postgres
	fi

	pgctl() { echo "${as[*]} $bin/pg_ctl -D $1 -w"; }
	running() { "${as[@]}" "$bin/pg_ctl" -D "$1" status >/dev/null 2>&1; }
	stop() {
		if [[ -f "$1/PG_VERSION" ]] && running "$1"; then
			"${as[@]}" "$bin/pg_ctl" -D "$1" -w stop -m fast >&2
		fi
	}

	# ensure DATA PORT: create (or reuse) the cluster in DATA, start it on
	# PORT, create database scarproxy_test.
	ensure() {
		local data="$1" p="$2"
		# A cluster of another major version or from a failed initdb is
		# replaced; a good one is reused.
		if [[ -d "$data" && "$(cat "$data/PG_VERSION" 2>/dev/null)" != "$(basename "$(dirname "$bin")")" ]]; then
			log "replacing unusable cluster in $data"
			"${as[@]}" "$bin/pg_ctl" -D "$data" stop -m immediate >/dev/null 2>&1 || true
			rm -rf "$data"
		fi
		if [[ ! -f "$data/PG_VERSION" ]]; then
			log "creating cluster in $data"
			"${as[@]}" "$bin/initdb" -D "$data" -U postgres -A trust -E UTF8 --no-sync >/dev/null
			cat >>"$data/postgresql.conf" <<-EOF
				# throwaway test cluster (.ci/postgres.sh)
				listen_addresses = '127.0.0.1'
				port = $p
				unix_socket_directories = '$dir'
				max_connections = 300
				fsync = off
				synchronous_commit = off
				full_page_writes = off
			EOF
		fi
		if running "$data"; then
			log "reusing running cluster in $data"
		else
			if (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
				log "port $p is in use by another program; set SCARPG_PORT"
				return 1
			fi
			"${as[@]}" "$bin/pg_ctl" -D "$data" -w -l "$data.log" start >&2 || {
				log "pg_ctl start failed; last lines of $data.log:"
				tail -n 20 "$data.log" >&2 || true
				return 1
			}
		fi
		local -a psql=("${as[@]}" "$bin/psql" -h 127.0.0.1 -p "$p" -U postgres -d postgres -v ON_ERROR_STOP=1 -qtA)
		if [[ "$("${psql[@]}" -c "SELECT 1 FROM pg_database WHERE datname = 'scarproxy_test'")" != 1 ]]; then
			"${psql[@]}" -c "CREATE DATABASE scarproxy_test" >&2
		fi
	}

	case "$cmd" in
	start)
		mkdir -p "$dir"
		chown "$owner" "$dir"
		chmod 700 "$dir"
		ensure "$dir/data" "$port"
		ensure "$dir/outage" "$((port + 1))"
		echo "export SCARPROXY_TEST_POSTGRES_DSN='postgres://postgres@127.0.0.1:$port/scarproxy_test?sslmode=disable'"
		echo "export SCARPROXY_TEST_PGCTL='$(pgctl "$dir/outage")'"
		echo "export SCARPROXY_TEST_PGCTL_DSN='postgres://postgres@127.0.0.1:$((port + 1))/scarproxy_test?sslmode=disable'"
		;;
	stop)
		stop "$dir/data"
		stop "$dir/outage"
		;;
	destroy)
		stop "$dir/data"
		stop "$dir/outage"
		rm -rf "$dir"
		;;
	*)
		log "unknown command $cmd (start, stop or destroy)"
		return 2
		;;
	esac
)

if [[ "${BASH_SOURCE[0]}" != "$0" ]]; then
	# Sourced: export the variables into the caller's shell.
	if scarpg_out=$(scarpg_main "$@"); then
		eval "$scarpg_out"
		unset scarpg_out
	else
		unset scarpg_out
		return 1
	fi
else
	scarpg_main "$@"
fi
