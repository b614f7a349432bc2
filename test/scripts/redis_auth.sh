#!/usr/bin/env bash
# Redis credentials: requirepass with fencing.redis_password, an ACL user,
# fencing.redis_password_file and its checks, the error codes of a refused
# AUTH or command; and that a non-superuser can read the password by no
# route: SHOW, current_setting, pg_settings, SHOW ALL, pg_file_settings,
# the password file, error messages, nor what a server echoes of it.  Last, the placeholder trap: without
# preloading, a password in postgresql.conf is readable by anyone until
# the library loads, which session_preload_libraries closes.
#
# Usage: bash test/scripts/redis_auth.sh   (prints ok/not ok lines; exit 0 = pass)
# test/run: quick
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib/redis_lib.sh"

SECRET='Red1s-Secret-pw'
WRONG='Wr0ng-Secret-pw'
FILE_SECRET='F1le-Secret-pw'
ACL_SECRET='Acl-Secret-pw'
CONF_SECRET='C0nf-Secret-pw'

harness_start_redis || exit 1
redis_start_pg || exit 1
harness_tmpdir SECRETS

# write_secret FILE MODE TEXT: a file of the cluster's OS user
write_secret() {
	as_pg_owner sh -c "umask 077; printf '%s\n' '$3' >'$1'; chmod $2 '$1'"
}

sql >/dev/null <<SQL
CREATE ROLE regress_app LOGIN;
GRANT EXECUTE ON FUNCTION fenced_acquire(text, interval, interval, boolean, interval, boolean, text),
	fenced_extend(text, interval), fenced_release(text), fenced_leases()
	TO regress_app;
SQL

# ------------------------------------------------ requirepass, password

rcli CONFIG SET requirepass "$SECRET" >/dev/null
REDIS_CLI_AUTH=(-a "$SECRET" --no-auth-warning)

sess_open s
sess s "SELECT fenced_acquire('order:1');"
expect "no password configured: SQLSTATE TF104" "$S" "TF104"
expect_match "Redis asked for authentication" "$R" "DETAIL: +NOAUTH"
expect_match "with a hint naming the settings" "$R" "HINT: +Set fencing.redis_password or fencing.redis_password_file"

sql -c "ALTER SYSTEM SET fencing.redis_password = '$SECRET'" -c "SELECT pg_reload_conf()" >/dev/null
sleep 0.2
sess s "SELECT fenced_acquire('order:1');"
expect_match "with fencing.redis_password the same session authenticates (reload, reconnect)" "$S|$R" '^00000\|[0-9]+$'
sess s "SHOW fencing.redis_password;"
expect "even a superuser sees only asterisks" "$R" "********"
sess s "SELECT count(*) FROM pg_settings WHERE name = 'fencing.redis_password';"
expect "and pg_settings does not list it" "$R" "0"

sess_open u -U regress_app
sess u "SELECT fenced_acquire('order:2');"
expect_match "a non-superuser granted EXECUTE acquires with the configured password" "$S|$R" '^00000\|[0-9]+$'
sess u "SHOW fencing.redis_password;"
expect "a non-superuser cannot SHOW the password" "$S" "42501"
sess u "SELECT current_setting('fencing.redis_password');"
expect "nor read it with current_setting()" "$S" "42501"
sess u "SELECT count(*) FROM pg_settings WHERE name = 'fencing.redis_password';"
expect "nor find it in pg_settings" "$R" "0"
sess u "SHOW ALL;"
expect_no_match "nor in SHOW ALL" "$R" "$SECRET"
sess u "SELECT setting FROM pg_file_settings;"
expect "nor read postgresql.auto.conf through pg_file_settings" "$S" "42501"
sess u "SET fencing.redis_password = 'x';"
expect "nor set it" "$S" "42501"
sess u "SET fencing.redis_host = '127.0.0.2';"
expect "nor point the backend at another server" "$S" "42501"

sql -c "ALTER SYSTEM SET fencing.redis_password = '$WRONG'" -c "SELECT pg_reload_conf()" >/dev/null
sleep 0.2
sess u "SELECT fenced_acquire('order:3');"
expect "a wrong password: SQLSTATE TF104" "$S" "TF104"
expect_match "could not authenticate, naming host and port" "$R" \
	"could not authenticate to Redis server at \"127.0.0.1:$REDIS_PORT\".*DETAIL: +Redis answered AUTH with \"WRONGPASS\"; the rest of its text is not shown"
expect_no_match "the message does not contain the configured password" "$R" "$WRONG"
expect_no_match "nor the server's" "$R" "$SECRET"
sess u "SHOW ALL;"
expect_no_match "SHOW ALL does not contain it either" "$R" "$WRONG"
sql -c "ALTER SYSTEM RESET fencing.redis_password" -c "SELECT pg_reload_conf()" >/dev/null
sleep 0.2

# ------------------------------------------------------------- password file

PWFILE=$SECRETS/redis.pw
write_secret "$PWFILE" 644 "$FILE_SECRET"
rcli CONFIG SET requirepass "$FILE_SECRET" >/dev/null
REDIS_CLI_AUTH=(-a "$FILE_SECRET" --no-auth-warning)
sql -c "ALTER SYSTEM SET fencing.redis_password_file = '$PWFILE'" -c "SELECT pg_reload_conf()" >/dev/null
sleep 0.2
sess s "SELECT fenced_acquire('order:4');"
expect "a password file readable by others is refused (F0000)" "$S" "F0000"
expect_match "saying why" "$R" "Redis password file \"$PWFILE\" has group or world access"
as_pg_owner chmod 600 "$PWFILE"
sess s "SELECT fenced_acquire('order:4');"
expect_match "a password file of mode 0600 is used" "$S|$R" '^00000\|[0-9]+$'
sess u "SELECT fenced_acquire('order:5');"
expect_match "for non-superusers too" "$S|$R" '^00000\|[0-9]+$'
sess u "SELECT pg_read_file('$PWFILE');"
expect "who cannot read the file through the server" "$S" "42501"

write_secret "$PWFILE" 600 "$ACL_SECRET"
rcli CONFIG SET requirepass "$ACL_SECRET" >/dev/null
REDIS_CLI_AUTH=(-a "$ACL_SECRET" --no-auth-warning)
sess_open s2
sess s2 "SELECT fenced_acquire('order:6');"
expect_match "the file is read again at every connect (password rotated)" "$S|$R" '^00000\|[0-9]+$'
sess s2 "SET fencing.redis_password = 'x'; SELECT fenced_acquire('order:7');"
expect "setting both the password and the file is an error" "$S" "F0000"
sess s2 "RESET fencing.redis_password; SET fencing.redis_password_file = '$SECRETS/missing'; SELECT fenced_acquire('order:7');"
expect "a missing password file is an error (58P01)" "$S" "58P01"
write_secret "$SECRETS/empty.pw" 600 ""
sess s2 "SET fencing.redis_password_file = '$SECRETS/empty.pw'; SELECT fenced_acquire('order:7');"
expect "an empty password file is an error" "$S" "F0000"
sess_close s2

# ---------------------------------------------------------------- ACL users

rcli ACL SETUSER fencer on ">$FILE_SECRET" '~*' '+@all' >/dev/null
rcli ACL SETUSER nolua on ">$FILE_SECRET" '~*' '+@all' '-eval' '-evalsha' >/dev/null
write_secret "$PWFILE" 600 "$FILE_SECRET"
sess_open s3
sess s3 "SET fencing.redis_username = 'fencer'; SELECT fenced_acquire('order:8');"
expect_match "AUTH with an ACL user name and the password file" "$S|$R" '^00000\|[0-9]+$'
expect "the connection is that user's" \
	"$(rcli CLIENT LIST | grep -c ' user=fencer ')" "1"
sess s3 "SET fencing.redis_username = 'nolua'; SELECT fenced_acquire('order:9');"
expect "an ACL user without EVAL: SQLSTATE TF104" "$S" "TF104"
expect_match "Redis's reason" "$R" "DETAIL: +NOPERM"
sess s3 "SET fencing.redis_username = 'nobody'; SELECT fenced_acquire('order:9');"
expect "an unknown ACL user: SQLSTATE TF104" "$S" "TF104"
expect_no_match "and the password is in no message" "$R" "$FILE_SECRET"
sess_close s3

sess_close s
sess_close u
sql -c "ALTER SYSTEM RESET fencing.redis_password_file" -c "SELECT pg_reload_conf()" >/dev/null

# ------------------------------------------- a server that echoes AUTH

# A server that renamed AUTH answers it as an unknown command, echoing its
# arguments cut to 128 bytes: a password longer than that used to leak
# through the DETAIL, which blotted out only the whole password.
ECHO_PORT=$(harness_free_port)
redis-server --bind 127.0.0.1 --port "$ECHO_PORT" --dir "$REDIS_DIR" --dbfilename echo.rdb \
	--save '' --appendonly no --daemonize no --logfile "$REDIS_DIR/echo.log" \
	--rename-command AUTH "" &
HARNESS_PIDS+=("$!")
for _ in $(seq 100); do
	redis-cli -p "$ECHO_PORT" ping >/dev/null 2>&1 && break
	sleep 0.05
done
LONG_SECRET="Long-$(printf 'Secret%.0s' $(seq 40))-pw"
echoed=$(redis-cli -p "$ECHO_PORT" AUTH "$LONG_SECRET" 2>&1)
expect_match "the server echoes the first 128 bytes of a renamed AUTH's arguments" "$echoed" \
	"unknown command 'AUTH', with args beginning with: '${LONG_SECRET:0:100}"
sess_open e
sess e "SET fencing.redis_port = $ECHO_PORT;"
sess e "SET fencing.redis_password = '$LONG_SECRET';"
sess e "SELECT fenced_acquire('order:10');"
expect "AUTH answered with an error: SQLSTATE TF104" "$S" "TF104"
expect_match "reported by its code alone" "$R" \
	"could not authenticate to Redis server at \"127.0.0.1:$ECHO_PORT\".*DETAIL: +Redis answered AUTH with an error; its text is not shown"
expect_no_match "the message holds no part of the password" "$R" "${LONG_SECRET:0:24}"
expect_no_match "nor the server's echo" "$R" "unknown command"
expect "nor does the server log (lines with part of it)" \
	"$(grep -c -F "${LONG_SECRET:0:24}" "$PGHOST/server.log")" "0"
sess_close e

# -------------------------------------------------- the placeholder trap

# A second cluster that does not preload fencing, with the password in
# postgresql.conf.
harness_start_pg "fencing.redis_password = '$CONF_SECRET'" || exit 1
sql >/dev/null <<'SQL'
CREATE ROLE regress_nobody LOGIN;
SQL
trap_seen=$(psql -X -q -A -t -U regress_nobody -c "SHOW fencing.redis_password" 2>&1)
expect "without preloading, anyone can SHOW the placeholder (the trap the README warns of)" \
	"$trap_seen" "$CONF_SECRET"
sql -c "ALTER SYSTEM SET session_preload_libraries = 'fencing'" -c "SELECT pg_reload_conf()" >/dev/null
sleep 0.2
closed=$(psql -X -q -A -t -U regress_nobody -c "SHOW fencing.redis_password" 2>&1)
expect_match "with session_preload_libraries it is protected from the first statement" "$closed" \
	"must be superuser or have privileges of pg_read_all_settings to examine \"fencing.redis_password\""
expect_no_match "and not shown" "$closed" "$CONF_SECRET"
closed=$(psql -X -q -A -t -U regress_nobody -c "SELECT current_setting('fencing.redis_password')" 2>&1)
expect_no_match "nor through current_setting()" "$closed" "$CONF_SECRET"

checks_finish
