# Highly available Redis topologies for the Sentinel and Cluster suites:
# sourced (after harness.sh), not run.
#
#   topology_start_sentinel   a primary, two replicas and three
#                             redis-sentinel processes watching them
#   topology_start_cluster    a Redis Cluster of three primaries and three
#                             replicas
#
# Everything listens on 127.0.0.1 only, runs without persistence, and is
# registered in HARNESS_PIDS, so the harness stops it by PID on exit,
# whatever the exit path.  Failure detection is fast (down-after-milliseconds
# and cluster-node-timeout of 1 s) so that failovers take a few seconds.
# Each suite starts its topology once, for all its tests.
#
# With TOPOLOGY_TLS set to a directory of certificates (topology_tls_certs),
# every node and Sentinel speaks TLS only, on every port (port 0, tls-port,
# tls-replication and tls-cluster yes, clients' certificates required), as
# deployments that use TLS run it; tcli and scli speak TLS to them.

TOPOLOGY_NODE_TIMEOUT=1000		# ms: down-after-milliseconds, cluster-node-timeout
SENTINEL_MASTER=fencingmaster	# the name the Sentinels know the primary by
SENTINEL_PASSWORD=sentinel-secret-7	# requirepass of every Sentinel
# With SENTINEL_USER set, the Sentinels have no requirepass but an ACL
# user of that name with SENTINEL_PASSWORD, every command and every Pub/Sub
# channel (Redis 7 grants no channel by default; the watch subscribes),
# and "default" off; they use it among themselves too (sentinel-user,
# sentinel-pass).
SENTINEL_USER=${SENTINEL_USER:-}

declare -A NODE_PID NODE_ARGS
TOPOLOGY_TLS=${TOPOLOGY_TLS:-}

# topology_tls_certs DIR: make, with openssl, a CA (ca.crt), a server
# certificate for 127.0.0.1 (server.crt: subjectAltName IP:127.0.0.1), one
# for a name only (name.crt: DNS:redis.test), a client certificate
# (client.crt), all signed by the CA, and a second CA that signed none of
# them (ca2.crt).  Keys are NAME.key, mode 0600, owned by the cluster's OS
# user.
topology_tls_certs() {
	local d=$1 n
	openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=fencing-test-ca \
		-keyout "$d/ca.key" -out "$d/ca.crt" 2>/dev/null || return 1
	openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=fencing-other-ca \
		-keyout "$d/ca2.key" -out "$d/ca2.crt" 2>/dev/null || return 1
	for n in server:IP:127.0.0.1 name:DNS:redis.test client:; do
		openssl req -newkey rsa:2048 -nodes -subj "/CN=${n%%:*}" \
			-keyout "$d/${n%%:*}.key" -out "$d/${n%%:*}.csr" 2>/dev/null || return 1
		if [ -n "${n#*:}" ]; then printf 'subjectAltName=%s\n' "${n#*:}"; else
			printf 'extendedKeyUsage=clientAuth\n'; fi >"$d/${n%%:*}.ext"
		openssl x509 -req -in "$d/${n%%:*}.csr" -CA "$d/ca.crt" -CAkey "$d/ca.key" \
			-CAcreateserial -days 2 -extfile "$d/${n%%:*}.ext" -out "$d/${n%%:*}.crt" 2>/dev/null || return 1
	done
	chmod 644 "$d"/*.crt
	chmod 600 "$d"/*.key
	if [ "$(id -u)" -eq 0 ]; then chown postgres: "$d"/*.key "$d"/*.crt; fi
}

# topology_tls_args: the TLS options of a node or Sentinel.
topology_tls_args() {
	[ -n "$TOPOLOGY_TLS" ] || return 0
	printf '%s ' --tls-cert-file "$TOPOLOGY_TLS/server.crt" --tls-key-file "$TOPOLOGY_TLS/server.key" \
		--tls-ca-cert-file "$TOPOLOGY_TLS/ca.crt" --tls-replication yes --tls-cluster yes
}

# tcli ARGS...: redis-cli, over TLS with the client certificate when the
# topology uses TLS.
tcli() {
	if [ -n "$TOPOLOGY_TLS" ]; then
		redis-cli --tls --cacert "$TOPOLOGY_TLS/ca.crt" --cert "$TOPOLOGY_TLS/client.crt" \
			--key "$TOPOLOGY_TLS/client.key" "$@"
	else
		redis-cli "$@"
	fi
}

# topology_port_args PORT: where a node or Sentinel listens.
topology_port_args() {
	if [ -n "$TOPOLOGY_TLS" ]; then echo "--port 0 --tls-port $1 $(topology_tls_args)"; else echo "--port $1"; fi
}

# topology_node PORT ARGS...: start one redis-server on PORT with the common
# settings plus ARGS, remembering both so that topology_node_restart can
# bring it back after a kill.
topology_node() {
	local port=$1
	shift
	NODE_ARGS[$port]="$*"
	topology_node_launch "$port"
}

topology_node_launch() {
	local port=$1
	# shellcheck disable=SC2086 # the arguments were split when saved
	# shellcheck disable=SC2046 # options, split on purpose
	redis-server --bind 127.0.0.1 $(topology_port_args "$port") --dir "$TOPOLOGY_DIR" \
		--dbfilename "dump-$port.rdb" --save '' --appendonly no \
		--daemonize no --logfile "$TOPOLOGY_DIR/redis-$port.log" ${NODE_ARGS[$port]} &
	NODE_PID[$port]=$!
	HARNESS_PIDS+=("$!")
	disown "$!"			# a node killed on purpose is not reported as "Killed"
	for _ in $(seq 200); do
		tcli -p "$port" ping >/dev/null 2>&1 && return 0
		sleep 0.05
	done
	cat "$TOPOLOGY_DIR/redis-$port.log" >&2
	return 1
}

# topology_node_kill PORT: SIGKILL the redis-server on PORT (one we started).
topology_node_kill() {
	local pid=${NODE_PID[$1]}
	kill -KILL "$pid" 2>/dev/null
	for _ in $(seq 100); do
		kill -0 "$pid" 2>/dev/null || return 0
		sleep 0.02
	done
	return 1
}

# topology_node_restart PORT: start a killed node again, with its arguments.
topology_node_restart() {
	topology_node_launch "$1"
}

# Free ports, one per line, distinct (the harness's probe alone could hand
# out one port twice before anything binds it).
topology_ports() {
	local n=$1 p seen=" "
	while [ "$n" -gt 0 ]; do
		p=$(harness_free_port) || return 1
		case "$seen" in *" $p "*) continue ;; esac
		seen="$seen$p "
		echo "$p"
		n=$((n - 1))
	done
}

# scli PORT ARGS...: redis-cli against a Sentinel, with its user and
# password.
scli() {
	local port=$1
	shift
	REDISCLI_AUTH=$SENTINEL_PASSWORD tcli -p "$port" ${SENTINEL_USER:+--user "$SENTINEL_USER"} "$@" 2>/dev/null
}

# topology_start_sentinel: sets SENTINEL_PORTS (three), DATA_PORTS (the
# primary first), SENTINEL_LIST ("127.0.0.1:p1,127.0.0.1:p2,...") and
# SENTINEL_PASSWORD_FILE (mode 0600, owned by the cluster's OS user).
topology_start_sentinel() {
	local ports p i primary
	[ -n "${TOPOLOGY_DIR:-}" ] || harness_tmpdir TOPOLOGY_DIR
	mapfile -t ports < <(topology_ports 6) || return 1
	DATA_PORTS=("${ports[@]:0:3}")
	SENTINEL_PORTS=("${ports[@]:3:3}")
	primary=${DATA_PORTS[0]}

	topology_node "$primary" --repl-diskless-sync yes --repl-diskless-sync-delay 0 || return 1
	for p in "${DATA_PORTS[@]:1}"; do
		topology_node "$p" --replicaof 127.0.0.1 "$primary" \
			--repl-diskless-sync yes --repl-diskless-sync-delay 0 || return 1
	done

	SENTINEL_LIST=
	for i in 0 1 2; do
		p=${SENTINEL_PORTS[$i]}
		# Sentinel rewrites its configuration file: it must be writable
		cat >"$TOPOLOGY_DIR/sentinel-$p.conf" <<EOF
bind 127.0.0.1
$(topology_port_args "$p" | sed 's/ --/\n/g; s/^--//')
daemonize no
logfile $TOPOLOGY_DIR/sentinel-$p.log
dir $TOPOLOGY_DIR
$(topology_sentinel_auth)
sentinel monitor $SENTINEL_MASTER 127.0.0.1 $primary 2
sentinel down-after-milliseconds $SENTINEL_MASTER $TOPOLOGY_NODE_TIMEOUT
sentinel failover-timeout $SENTINEL_MASTER 3000
sentinel parallel-syncs $SENTINEL_MASTER 2
EOF
		redis-sentinel "$TOPOLOGY_DIR/sentinel-$p.conf" &
		NODE_PID[$p]=$!
		HARNESS_PIDS+=("$!")
		disown "$!"		# one killed on purpose is not reported as "Killed"
		SENTINEL_LIST="${SENTINEL_LIST:+$SENTINEL_LIST,}127.0.0.1:$p"
	done

	SENTINEL_PASSWORD_FILE=$TOPOLOGY_DIR/sentinel.pass
	printf '%s\n' "$SENTINEL_PASSWORD" >"$SENTINEL_PASSWORD_FILE"
	chmod 600 "$SENTINEL_PASSWORD_FILE"
	if [ "$(id -u)" -eq 0 ]; then chown postgres: "$SENTINEL_PASSWORD_FILE"; fi

	topology_sentinel_settled
}

# topology_sentinel_auth: the authentication lines of a Sentinel's
# configuration.
topology_sentinel_auth() {
	if [ -n "$SENTINEL_USER" ]; then
		printf 'user default off\nuser %s on >%s +@all &*\nsentinel sentinel-user %s\nsentinel sentinel-pass %s\n' \
			"$SENTINEL_USER" "$SENTINEL_PASSWORD" "$SENTINEL_USER" "$SENTINEL_PASSWORD"
	else
		printf 'requirepass %s\n' "$SENTINEL_PASSWORD"
	fi
}

# topology_sentinel_settled: wait (up to 30 s) until every Sentinel names
# the same primary, sees two replicas and the two other Sentinels, and the
# primary has two replicas online: the state a failover can start from.
topology_sentinel_settled() {
	local p ok addr first
	for _ in $(seq 300); do
		ok=1
		first=
		for p in "${SENTINEL_PORTS[@]}"; do
			addr=$(scli "$p" SENTINEL get-master-addr-by-name "$SENTINEL_MASTER" | tr '\n' ':')
			[ -n "$first" ] || first=$addr
			if [ "$addr" != "$first" ] ||
				[ "$(scli "$p" SENTINEL master "$SENTINEL_MASTER" |
					awk 'prev == "num-other-sentinels" {print} {prev = $0}')" != 2 ] ||
				[ "$(scli "$p" SENTINEL replicas "$SENTINEL_MASTER" | grep -c '^flags$')" != 2 ] ||
				scli "$p" SENTINEL replicas "$SENTINEL_MASTER" | grep -q 'disconnected\|s_down'; then
				ok=0
				break
			fi
		done
		if [ "$ok" = 1 ] && [ -n "$first" ] &&
			[ "$(tcli -p "${first#*:}" INFO replication | tr -d '\r' |
				grep -c '^slave[0-9]*:.*state=online')" = 2 ]; then
			SENTINEL_PRIMARY=${first%:}
			SENTINEL_PRIMARY=${SENTINEL_PRIMARY#*:}
			return 0
		fi
		sleep 0.1
	done
	echo "# Sentinel topology did not settle" >&2
	for p in "${SENTINEL_PORTS[@]}"; do tail -5 "$TOPOLOGY_DIR/sentinel-$p.log" >&2; done
	return 1
}

# topology_sentinel_failover OLD: SENTINEL FAILOVER of the primary at port
# OLD, asked again while no Sentinel names another primary: a failover the
# Sentinels were asked for is abandoned, not retried, when the promoted
# replica does not report itself primary within the failover-timeout (3 s),
# which a loaded machine can make it miss (redis_tls once spent its whole
# minute on the old primary that way).  A request made while a failover is
# under way is refused (INPROG) and changes nothing.  Returns 0 once a
# Sentinel names a primary other than OLD, 1 after a minute; a refusal is
# printed as a comment.
topology_sentinel_failover() {
	local old=$1 reply np
	for _ in 1 2 3 4 5 6; do
		reply=$(scli "${SENTINEL_PORTS[0]}" SENTINEL FAILOVER "$SENTINEL_MASTER")
		[ "$reply" = OK ] || echo "# SENTINEL FAILOVER: ${reply:-no reply}" >&2
		for _ in $(seq 100); do
			np=$(topology_sentinel_primary)
			[ -n "$np" ] && [ "$np" != "$old" ] && return 0
			sleep 0.1
		done
	done
	return 1
}

# topology_sentinel_primary: the port the Sentinels name as primary now.
topology_sentinel_primary() {
	scli "${SENTINEL_PORTS[0]}" SENTINEL get-master-addr-by-name "$SENTINEL_MASTER" | sed -n 2p
}

# topology_wait_new_primary OLD: wait (up to 30 s) until every Sentinel
# names a primary other than port OLD and that node says it is master.
topology_wait_new_primary() {
	local old=$1 p np
	for _ in $(seq 300); do
		np=
		for p in "${SENTINEL_PORTS[@]}"; do
			np=$(scli "$p" SENTINEL get-master-addr-by-name "$SENTINEL_MASTER" | sed -n 2p)
			[ -n "$np" ] && [ "$np" != "$old" ] || { np=; break; }
		done
		if [ -n "$np" ] && tcli -p "$np" ROLE 2>/dev/null | head -1 | grep -q '^master$'; then
			SENTINEL_PRIMARY=$np
			return 0
		fi
		sleep 0.1
	done
	return 1
}

# topology_start_cluster: six cluster-enabled nodes and "redis-cli
# --cluster create" with one replica each.  Sets CLUSTER_PORTS and
# CLUSTER_SEEDS ("127.0.0.1:p1,127.0.0.1:p2,127.0.0.1:p3").
topology_start_cluster() {
	local ports p i addrs=()
	[ -n "${TOPOLOGY_DIR:-}" ] || harness_tmpdir TOPOLOGY_DIR
	mapfile -t ports < <(topology_ports 12) || return 1
	CLUSTER_PORTS=("${ports[@]:0:6}")
	for i in 0 1 2 3 4 5; do
		p=${CLUSTER_PORTS[$i]}
		# an explicit bus port: the default, port + 10000, may be taken
		topology_node "$p" --cluster-enabled yes --cluster-config-file "nodes-$p.conf" \
			--cluster-node-timeout "$TOPOLOGY_NODE_TIMEOUT" --cluster-port "${ports[$((6 + i))]}" \
			--repl-diskless-sync yes --repl-diskless-sync-delay 0 || return 1
		addrs+=("127.0.0.1:$p")
	done
	tcli --cluster create "${addrs[@]}" --cluster-replicas 1 --cluster-yes \
		>"$TOPOLOGY_DIR/cluster-create.log" 2>&1 ||
		{ cat "$TOPOLOGY_DIR/cluster-create.log" >&2; return 1; }
	CLUSTER_SEEDS=$(IFS=,; echo "${addrs[*]:0:3}")
	topology_cluster_settled
}

# topology_cluster_settled: wait (up to 30 s) until every live node says
# cluster_state:ok and agrees on three primaries each with a replica.
topology_cluster_settled() {
	local p ok
	for _ in $(seq 300); do
		ok=1
		for p in "${CLUSTER_PORTS[@]}"; do
			kill -0 "${NODE_PID[$p]}" 2>/dev/null || continue
			tcli -p "$p" CLUSTER INFO 2>/dev/null | grep -q '^cluster_state:ok' || { ok=0; break; }
			[ "$(tcli -p "$p" CLUSTER NODES 2>/dev/null |
				awk '$3 ~ /master/ && $3 !~ /fail/ && $9 != "" {n++} END {print n + 0}')" = 3 ] ||
				{ ok=0; break; }
		done
		[ "$ok" = 1 ] && return 0
		sleep 0.1
	done
	echo "# Redis Cluster did not settle" >&2
	return 1
}

# topology_cluster_node_of KEY: the port of the primary serving KEY's slot.
topology_cluster_node_of() {
	local slot p
	for p in "${CLUSTER_PORTS[@]}"; do
		slot=$(tcli -p "$p" CLUSTER KEYSLOT "$1" 2>/dev/null) && break
	done
	tcli -p "$p" CLUSTER NODES | awk -v s="$slot" '
		$3 ~ /master/ && $3 !~ /fail/ {
			for (i = 9; i <= NF; i++) {
				n = split($i, r, "-")
				if (n == 1) r[2] = r[1]
				if (s + 0 >= r[1] + 0 && s + 0 <= r[2] + 0) {
					split($2, a, "[:@]")
					print a[2]
					exit
				}
			}
		}'
}
