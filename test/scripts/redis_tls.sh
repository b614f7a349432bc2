#!/usr/bin/env bash
# TLS to Redis (fencing.redis_tls and its files) against real redis-servers
# that speak TLS only (port 0, tls-port), with certificates made here by
# openssl (test/lib/topology.sh, topology_tls_certs):
#
#   each mode accepts what it should and refuses what it should: a wrong
#   CA (require with a CA file, verify-ca, verify-full), a wrong name
#   (verify-full only), an IP address verified against the iPAddress
#   subjectAltName, plain TCP to a TLS port, TLS to a plain port, a
#   missing client certificate with tls-auth-clients yes, a key file
#   readable by others;
#   one handshake per connection: the session tickets TLS 1.3 servers send
#   after the handshake do not make a connection look stale, and one the
#   server closed is replaced;
#   cancel and statement_timeout during a handshake that never completes
#   (a listener that accepts and says nothing) end the call within 100 ms;
#   a Sentinel topology and a Redis Cluster with TLS on every port
#   (tls-replication, tls-cluster), one failover each, the ports the
#   Cluster hands out being the TLS ones;
#   the Redis password appears in no message and in no log.
#
# Usage: bash test/scripts/redis_tls.sh   (prints ok/not ok lines; exit 0 = pass)
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib/redis_lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/../lib/topology.sh"

PW=tls-secret-pw-8c1f
harness_tmpdir CERTS
topology_tls_certs "$CERTS" || { echo "not ok - openssl made the certificates"; exit 1; }
harness_tmpdir TOPOLOGY_DIR
PW_FILE=$CERTS/redis.pass
printf '%s\n' "$PW" >"$PW_FILE"
chmod 600 "$PW_FILE"
if [ "$(id -u)" -eq 0 ]; then chown postgres: "$PW_FILE"; fi

# tls_server PORT CERT AUTH-CLIENTS: a redis-server speaking TLS only on
# PORT, with the certificate CERT (server, name) and requirepass.
tls_server() {
	redis-server --bind 127.0.0.1 --port 0 --tls-port "$1" --tls-cert-file "$CERTS/$2.crt" \
		--tls-key-file "$CERTS/$2.key" --tls-ca-cert-file "$CERTS/ca.crt" --tls-auth-clients "$3" \
		--requirepass "$PW" --dir "$TOPOLOGY_DIR" --dbfilename "dump-$1.rdb" --save '' \
		--appendonly no --daemonize no --logfile "$TOPOLOGY_DIR/redis-$1.log" &
	HARNESS_PIDS+=("$!")
	for _ in $(seq 100); do
		REDISCLI_AUTH=$PW TOPOLOGY_TLS=$CERTS tcli -p "$1" ping >/dev/null 2>&1 && return 0
		sleep 0.05
	done
	cat "$TOPOLOGY_DIR/redis-$1.log" >&2
	return 1
}

IP_PORT=$(harness_free_port)		# server.crt (IP:127.0.0.1), no client certificates
NAME_PORT=$(harness_free_port)		# name.crt (DNS:redis.test), client certificates required
tls_server "$IP_PORT" server no || exit 1
tls_server "$NAME_PORT" name yes || exit 1
harness_start_redis || exit 1		# plain TCP, for TLS to a plain port
SILENT_PORT=$(harness_free_port)

redis_start_pg \
	"fencing.redis_port = $IP_PORT" \
	"fencing.redis_password_file = '$PW_FILE'" \
	"fencing.redis_tls = 'verify-full'" \
	"fencing.redis_tls_ca_file = '$CERTS/ca.crt'" \
	"fencing.redis_connect_timeout = '2s'" \
	"log_min_messages = debug1" || exit 1

sess_open a
n=0
# attempt SQL: in session a, back to the configured settings, run SQL (SET
# statements), and take a fresh lock; sets S and R (see redis_lib.sh).
attempt() {
	n=$((n + 1))
	sess a "RESET ALL; $1 SELECT fenced_acquire('tls:$n', ttl => '5s') > 0 AS locked;"
	ALL_OUTPUT+="$R"$'\n'
}
ALL_OUTPUT=
CLIENT_CERT="SET fencing.redis_tls_cert_file = '$CERTS/client.crt'; SET fencing.redis_tls_key_file = '$CERTS/client.key';"

# -------------------------------------------------------------- the modes

attempt ""
expect "verify-full to 127.0.0.1: the certificate's IP address subjectAltName matches" "$S|$R" "00000|t"
expect "the renewer renews over TLS (verify-full)" "$(renewed_across tls:renew)" "t|t|t"
attempt "SET fencing.redis_tls = 'verify-ca';"
expect "verify-ca: the chain verifies" "$S|$R" "00000|t"
attempt "SET fencing.redis_tls = 'require'; SET fencing.redis_tls_ca_file = '';"
expect "require without a CA file: encrypted, nothing verified" "$S|$R" "00000|t"

attempt "SET fencing.redis_tls_ca_file = '$CERTS/ca2.crt';"
expect "verify-full, the wrong CA: TF107" "$S" "TF107"
expect_match "naming the server and the verifier's reason" "$R" \
	"TLS handshake with Redis server at \"127\.0\.0\.1:$IP_PORT\" failed: certificate verify failed: (unable to get local issuer certificate|self.signed certificate)"
expect_match "with a hint at the CA file" "$R" "HINT: +Check fencing.redis_tls_ca_file"
attempt "SET fencing.redis_tls = 'verify-ca'; SET fencing.redis_tls_ca_file = '$CERTS/ca2.crt';"
expect "verify-ca, the wrong CA: TF107" "$S" "TF107"
attempt "SET fencing.redis_tls = 'require'; SET fencing.redis_tls_ca_file = '$CERTS/ca2.crt';"
expect "require with a CA file verifies the chain, as libpq does: TF107" "$S" "TF107"

attempt "SET fencing.redis_tls_server_name = 'redis.test';"
expect "verify-full, the wrong name: TF107" "$S" "TF107"
expect_match "hostname mismatch" "$R" "certificate verify failed: hostname mismatch"
attempt "SET fencing.redis_tls = 'verify-ca'; SET fencing.redis_tls_server_name = 'redis.test';"
expect "verify-ca does not check the name" "$S|$R" "00000|t"
attempt "SET fencing.redis_tls = 'require'; SET fencing.redis_tls_ca_file = ''; SET fencing.redis_tls_server_name = 'redis.test';"
expect "nor does require" "$S|$R" "00000|t"

# ---------------------------------------- a name, and client certificates

attempt "SET fencing.redis_port = $NAME_PORT; SET fencing.redis_tls_server_name = 'redis.test'; $CLIENT_CERT"
expect "mutual TLS, verify-full by fencing.redis_tls_server_name (DNS subjectAltName)" "$S|$R" "00000|t"
attempt "SET fencing.redis_port = $NAME_PORT; $CLIENT_CERT"
expect "an IP address is not matched against DNS names: TF107" "$S" "TF107"
expect_match "IP address mismatch" "$R" "certificate verify failed: IP address mismatch"
attempt "SET fencing.redis_port = $NAME_PORT; SET fencing.redis_tls_server_name = 'redis.test';"
# the server's alert (TF107), or, when its reset overtakes the alert, a
# lost connection (TF101), both with a hint at the certificate settings
expect_match "no client certificate, tls-auth-clients yes: refused" "$S" "^TF10[17]$"
expect_match "the server's alert or the lost connection, and a hint at the certificate settings" "$R" \
	"(Redis server at \"127\.0\.0\.1:$NAME_PORT\" failed: .*(certificate required|handshake failure)|lost connection to Redis server at \"127\.0\.0\.1:$NAME_PORT\").*HINT: .*(The server requires a client certificate|wants one \(tls-auth-clients\))"

cp "$CERTS/client.key" "$CERTS/open.key"
chmod 644 "$CERTS/open.key"
attempt "SET fencing.redis_port = $NAME_PORT; SET fencing.redis_tls_server_name = 'redis.test'; SET fencing.redis_tls_cert_file = '$CERTS/client.crt'; SET fencing.redis_tls_key_file = '$CERTS/open.key';"
expect "a key file readable by others: F0000" "$S" "F0000"
expect_match "said so" "$R" "Redis TLS key file \"$CERTS/open.key\" has group or world access"
attempt "SET fencing.redis_tls_cert_file = '$CERTS/client.crt';"
expect "a certificate without its key: F0000" "$S" "F0000"
attempt "SET fencing.redis_tls_ca_file = '$CERTS/nonexistent.crt';"
expect "a CA file that cannot be loaded: F0000" "$S" "F0000"
expect_match "naming it" "$R" "could not load Redis TLS CA file \"$CERTS/nonexistent.crt\""

# ------------------------------------------------- TLS and plain TCP mixed

attempt "SET fencing.redis_tls = 'disable';"
expect "plain TCP to a TLS port: TF101" "$S" "TF101"
expect_match "the server drops the connection" "$R" "lost connection to Redis server at \"127\.0\.0\.1:$IP_PORT\""
attempt "SET fencing.redis_port = $REDIS_PORT; SET fencing.redis_connect_timeout = '1s';"
expect_match "TLS to a plain port: refused (TF107, or the handshake times out)" "$S" "^TF10[17]$"
expect_match "in the handshake" "$R" "TLS handshake with Redis server at \"127\.0\.0\.1:$REDIS_PORT\""
attempt "SET fencing.redis_host = '$REDIS_SOCKET'; SET fencing.redis_password_file = '';"
expect "a Unix socket carries no TLS (as libpq's sslmode)" "$S|$R" "00000|t"

sql -c "CREATE ROLE regress_app LOGIN" >/dev/null
sess_open app -U regress_app
for setting in redis_tls redis_tls_ca_file redis_tls_cert_file redis_tls_key_file redis_tls_server_name; do
	sess app "SET fencing.$setting = 'x';"
	expect "fencing.$setting is superuser-only" "$S" "42501"
done
sess_close app

# ------------------------------------------- one handshake per connection

connects() { sql -c "SELECT connects FROM fence_stat_redis"; }
sess a "RESET ALL; SELECT fenced_acquire('tls:reuse', ttl => '5s') > 0;"
sleep 0.3	# session tickets, if any, have arrived by now
c0=$(connects)
for i in 1 2 3 4 5; do sess a "SELECT fenced_extend('tls:reuse', ttl => '5s');"; done
expect "five calls on one TLS connection: no new connection (session tickets are not unasked data)" "$(connects)" "$c0"
REDISCLI_AUTH=$PW TOPOLOGY_TLS=$CERTS tcli -p "$IP_PORT" CLIENT KILL TYPE normal >/dev/null
sleep 0.2
sess a "SELECT fenced_extend('tls:reuse', ttl => '5s');"
expect "a TLS connection the server closed is replaced before the next call" "$S|$R" "00000|t"
expect "by one new connection" "$(connects)" "$((c0 + 1))"

# --------------------------------------- interrupts in a silent handshake

# A listener that accepts and says nothing: the handshake never completes.
python3 - "$SILENT_PORT" <<'PY' &
import socket, sys, time
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1])))
s.listen(16)
held = []
while True:
    c, _ = s.accept()
    held.append(c)
PY
HARNESS_PIDS+=("$!")
for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$SILENT_PORT") 2>/dev/null && break; sleep 0.05; done

# interrupt HOW: a call in the silent handshake, fencing.redis_connect_timeout
# 60 s, interrupted by HOW; prints the SQLSTATE, the message, and the ms
# from the interrupt (the cancel request, or the statement_timeout of
# 300 ms after the call began) to the error.
interrupt() {
	/usr/bin/python3 - "$1" "$SILENT_PORT" <<'PY'
import sys, threading, time
import psycopg2
how, port = sys.argv[1], sys.argv[2]
conn = psycopg2.connect("")
conn.autocommit = True
cur = conn.cursor()
cur.execute("SET fencing.redis_port = %s; SET fencing.redis_connect_timeout = '60s'" % port)
if how == "statement_timeout":
    cur.execute("SET statement_timeout = '300ms'")
sent = {}
def cancel():
    time.sleep(0.5)
    sent["t"] = time.monotonic()
    conn.cancel()
if how == "cancel":
    threading.Thread(target=cancel).start()
t0 = time.monotonic()
try:
    cur.execute("SELECT fenced_acquire('tls:silent')")
    print("00000 no error 0")
except psycopg2.Error as e:
    t1 = time.monotonic()
    start = sent["t"] if how == "cancel" else t0 + 0.3
    print(e.pgcode, e.pgerror.splitlines()[0], int((t1 - start) * 1000))
PY
}
for how in cancel statement_timeout; do
	out=$(interrupt "$how")
	case $how in
		cancel) want="57014 ERROR:  canceling statement due to user request" ;;
		statement_timeout) want="57014 ERROR:  canceling statement due to statement timeout" ;;
	esac
	expect_match "$how in a handshake that never completes: its own error" "$out" "^$want [0-9]+$"
	ms=${out##* }
	check "within 1 s of the $how, not at the 60 s connect timeout ($ms ms)" test "${ms:-99999}" -lt 1000
done

# ------------------------------------------------- Sentinel, TLS everywhere

TOPOLOGY_TLS=$CERTS
lock_on() { tcli -p "$1" EXISTS 'fencing:v1:{r:'"$2"'}:lock' 2>/dev/null; }
CLUSTER_TLS_SETTINGS="SET fencing.redis_password_file = ''; $CLIENT_CERT"

if topology_start_sentinel; then
	ok "a Sentinel topology with TLS on every port (tls-replication yes) settles"
	SENTINEL_SETTINGS="SET fencing.redis_sentinels = '$SENTINEL_LIST'; SET fencing.redis_sentinel_master = '$SENTINEL_MASTER'; SET fencing.redis_sentinel_password_file = '$SENTINEL_PASSWORD_FILE'; $CLUSTER_TLS_SETTINGS"
	attempt "$SENTINEL_SETTINGS"
	expect "fenced_acquire through TLS Sentinels, mutual TLS" "$S|$R" "00000|t"
	attempt "$SENTINEL_SETTINGS SET fencing.redis_tls_ca_file = '$CERTS/ca2.crt';"
	expect "the Sentinels' certificates do not verify: TF107" "$S" "TF107"
	expect_match "naming each Sentinel and the reason" "$R" "127\.0\.0\.1:${SENTINEL_PORTS[0]} TLS failed: certificate verify failed"

	old=$SENTINEL_PRIMARY
	sess a "RESET ALL; $SENTINEL_SETTINGS SELECT fenced_acquire('s:fo', ttl => '500ms');"
	before=$R
	# asked again if the Sentinels abandon it (topology_sentinel_failover)
	topology_sentinel_failover "$old" &
	mover=$!
	t0=$(now_ms)
	np=
	while [ $(($(now_ms) - t0)) -lt 60000 ]; do
		sess a "SELECT fenced_acquire('s:fo', ttl => '500ms', wait => '1s');"
		if [ "$S" = 00000 ] && [ -n "$R" ]; then
			np=$(topology_sentinel_primary)
			[ -n "$np" ] && [ "$np" != "$old" ] && [ "$(lock_on "$np" s:fo)" = 1 ] && break
		fi
		np=
		sleep 0.02
	done
	wait "$mover" || true
	check "SENTINEL FAILOVER: the session takes the lock on the new primary, over TLS" test -n "$np"
	check "with a token above the one before ($R > $before)" test "${R:-0}" -gt "${before:-0}"
	echo "# Sentinel failover: first acquisition from the new primary $(($(now_ms) - t0)) ms after it began"
else
	not_ok "a Sentinel topology with TLS on every port (tls-replication yes) settles"
fi
# the Sentinel topology is done with: stop it, to leave the CPUs to the Cluster
for p in "${DATA_PORTS[@]}" "${SENTINEL_PORTS[@]}"; do topology_node_kill "$p"; done
sess a "RESET ALL;"

# -------------------------------------------------- Cluster, TLS everywhere

if topology_start_cluster; then
	ok "a Redis Cluster with TLS on every port (tls-cluster yes) settles"
	CLUSTER_SETTINGS="SET fencing.redis_cluster_nodes = '$CLUSTER_SEEDS'; $CLUSTER_TLS_SETTINGS"
	# the nodes listen on nothing but their TLS ports (port 0), so the
	# ports the map names must be those
	slots_ports=$(tcli -p "${CLUSTER_PORTS[0]}" CLUSTER SLOTS | awk 'prev ~ /^127\.0\.0\.1$/ {print} {prev = $0}' | sort -u)
	unknown=$(printf '%s\n' "$slots_ports" | grep -vxF -f <(printf '%s\n' "${CLUSTER_PORTS[@]}"))
	check "CLUSTER SLOTS names the nodes' TLS ports ($(echo $slots_ports))" \
		test -z "$unknown" -a "$(printf '%s\n' "$slots_ports" | grep -c .)" -ge 3
	for k in 1 2 3 4 5 6; do
		attempt "$CLUSTER_SETTINGS"
		[ "$S|$R" = "00000|t" ] || break
	done
	expect "six resources across the slots, over TLS to every primary the map names" "$S|$R" "00000|t"

	node_id() { tcli -p "$1" CLUSTER MYID; }
	old=$(topology_cluster_node_of "$(lock_key c:fo)")
	replica=$(tcli -p "$old" CLUSTER NODES | awk -v id="$(node_id "$old")" '$4 == id { split($2, a, "[:@]"); print a[2]; exit }')
	sess a "RESET ALL; $CLUSTER_SETTINGS SELECT fenced_acquire('c:fo', ttl => '500ms');"
	before=$R
	tcli -p "$replica" CLUSTER FAILOVER >/dev/null
	t0=$(now_ms)
	np=
	while [ $(($(now_ms) - t0)) -lt 60000 ]; do
		sess a "SELECT fenced_acquire('c:fo', ttl => '500ms', wait => '1s');"
		if [ "$S" = 00000 ] && [ -n "$R" ]; then
			np=$(topology_cluster_node_of "$(lock_key c:fo)")
			[ -n "$np" ] && [ "$np" != "$old" ] && [ "$(lock_on "$np" c:fo)" = 1 ] && break
		fi
		np=
		sleep 0.02
	done
	check "CLUSTER FAILOVER: the session takes the lock on the new primary, over TLS" test -n "$np"
	check "with a token above the one before ($R > $before)" test "${R:-0}" -gt "${before:-0}"
	echo "# Cluster failover: first acquisition from the new primary $(($(now_ms) - t0)) ms after it began"
else
	not_ok "a Redis Cluster with TLS on every port (tls-cluster yes) settles"
fi
sess_close a

# ------------------------------------------------ the password stays secret

expect_no_match "the password is in no message the sessions saw" "$ALL_OUTPUT$(cat "$SESS_DIR"/*.out)" "$PW"
expect_no_match "nor in the server's log (at debug1)" "$(cat "$PGHOST/server.log")" "$PW"

checks_finish
