#!/usr/bin/env bash
# Sentinel mode against real redis-sentinel processes that know an ACL user
# instead of a requirepass (test/lib/topology.sh with SENTINEL_USER: the
# "default" user is off, and the Sentinels authenticate to each other as
# that user): fencing.redis_sentinel_username with the password of
# fencing.redis_sentinel_password_file.
#
# Usage: bash test/scripts/redis_sentinel_acl.sh   (prints ok/not ok lines; exit 0 = pass)
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib/redis_lib.sh"
SENTINEL_USER=fencer
source "$(dirname "${BASH_SOURCE[0]}")/../lib/topology.sh"

topology_start_sentinel || exit 1

harness_start_pg \
	"shared_preload_libraries = 'fencing'" \
	"fencing.redis_host = '127.0.0.1'" \
	"fencing.redis_port = $(harness_free_port)" \
	"fencing.redis_sentinels = '$SENTINEL_LIST'" \
	"fencing.redis_sentinel_master = '$SENTINEL_MASTER'" \
	"fencing.redis_sentinel_password_file = '$SENTINEL_PASSWORD_FILE'" || exit 1
sql -c "CREATE EXTENSION fencing" >/dev/null

sess_open a
sess a "SELECT fenced_acquire('acl:1');"
expect "the password alone (the disabled default user): TF104" "$S" "TF104"
expect_match "refused by every Sentinel" "$R" \
	"could not authenticate to the Redis Sentinels of master \"$SENTINEL_MASTER\".*DETAIL: +127\.0\.0\.1:[0-9]+ refused the password; .*HINT: +Check fencing.redis_sentinel_username"

sess a "SET fencing.redis_sentinel_username = '$SENTINEL_USER'; SELECT fenced_acquire('acl:1');"
expect_match "with fencing.redis_sentinel_username: acquired through the Sentinels" "$S|$R" "^00000\|[1-9][0-9]*$"
sess a "SELECT fenced_release('acl:1');"
expect "and released" "$S|$R" "00000|t"
sess a "SET fencing.redis_sentinel_username = 'nobody'; SELECT fenced_acquire('acl:2');"
expect "another user: TF104" "$S" "TF104"
sess a "SET fencing.redis_sentinel_username = 'two words';"
expect "a user name with white space is refused" "$S" "22023"

sql -c "CREATE ROLE regress_app LOGIN" >/dev/null
sess_open u -U regress_app
sess u "SET fencing.redis_sentinel_username = 'x';"
expect "a non-superuser cannot set it" "$S" "42501"
sess_close u

# ALTER SYSTEM and a reload serve new sessions
sql -c "ALTER SYSTEM SET fencing.redis_sentinel_username = '$SENTINEL_USER'" -c "SELECT pg_reload_conf()" >/dev/null
sleep 0.3
sess_open b
sess b "SELECT fenced_acquire('acl:3'), fenced_release('acl:3');"
expect_match "from postgresql.auto.conf" "$S|$R" "^00000\|[1-9][0-9]*\|t$"
sess_close b
sql -c "ALTER SYSTEM RESET fencing.redis_sentinel_username" -c "SELECT pg_reload_conf()" >/dev/null

sess_close a
checks_finish
