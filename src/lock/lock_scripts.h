/*-------------------------------------------------------------------------
 *
 * lock_scripts.h
 *	  The Lua scripts of key layout v1: acquire, extend, release.
 *
 * Plain C string constants with no PostgreSQL dependency, so that the
 * benchmark (test/bench/acquire) can send byte-identical scripts, with the
 * same SHA1, from a bare hiredis client.
 *
 * Every key a script touches is passed in KEYS, as Redis ACLs and Cluster
 * routing require.  The lock key holds the owner string with a PX expiry;
 * the token counter key holds a decimal integer, the last token issued,
 * with a PX expiry a little beyond the lock's, or none where the caller
 * says the key is shared with other clients.
 *
 * Tokens travel back as strings, never as Lua numbers: Redis converts
 * integer replies to Lua numbers, which are doubles, and a counter above
 * 2^53 would silently lose its low bits.  For the same reason tokens are
 * computed and compared as decimal strings.
 *
 * A script is atomic but not transactional: when a command in it fails,
 * the writes before it stay.  The acquire script therefore checks the
 * lock, validates the counter and computes the token before it writes
 * anything, then stores the token and sets the lock last.
 *
 * TIME before a write is allowed in a script since Redis 5 (effects
 * replication, the only mode from 7.0).
 *
 * IDENTIFICATION
 *	  src/lock/lock_scripts.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef FENCED_LOCK_SCRIPTS_H
#define FENCED_LOCK_SCRIPTS_H

/*
 * How far past the high-water mark a counter that went backwards is set,
 * before the Redis clock is added: a repaired token is mark + gap + T, T
 * being the Redis server's clock in microseconds (doc/lock-failures.md,
 * "Tokens after repeated losses").
 *
 * The gap keeps it above the tokens that the lost counter handed out above
 * the mark to holders that have not written yet (a second's worth of
 * clock-made tokens).  T orders two repairs from the same mark.  The mark
 * is the only record of a repaired token that survives Redis losing the
 * counter again, and an acquisition may leave none: its transaction
 * aborted, or the raise at acquisition was off.  With mark + gap alone,
 * the second repair would issue the first one's token again; with T it is
 * above the first and above the tokens counted on from it, under the
 * assumption the clock rule makes already (the clock is not stepped back,
 * and no resource gets more than one token per microsecond).
 */
#define FENCED_REPAIR_GAP			1000000
#define FENCED_REPAIR_GAP_TEXT		"1000000"

/*
 * acquire
 *	KEYS[1] lock key, KEYS[2] token counter key
 *	ARGV[1] new owner, ARGV[2] ttl in ms,
 *	ARGV[3] floor: the database's newest high-water mark, or '' for none,
 *	ARGV[4] '1' to refuse a token counted on from a repaired counter (see
 *		below), '' to issue it,
 *	ARGV[5] lifetime of the counter key in ms, or '' to keep it forever,
 *	ARGV[6..] owners under which the caller may already hold the lock (an
 *		acquisition whose reply was lost, or a lease being re-acquired)
 *
 * Ten arguments with the command's name, the SHA1 and the keys, as long
 * as there is no owner to take over: Redis refuses a command of more than
 * ten from a client that has not authenticated, and that client must hear
 * NOAUTH.
 *
 * Returns {1, token, repaired, the rule's token} when the lock was taken,
 * {0, PTTL of the lock} when it is busy, {2, the rule's token, TIME in
 * microseconds} when it was refused, with nothing written.
 *
 * The token rule: max(counter + 1, microseconds of the server's TIME),
 * stored back in the counter.  While the counter lives, tokens strictly
 * increase; when Redis has lost it (a flush, a restart without data or
 * from an older snapshot, a failover to a replica that missed the last
 * grants), the clock still puts the next token above every token issued
 * before, as long as that clock is not behind the one that issued them.
 * A counter that expired did so by the same clock, after its last token's
 * time.  When the rule's token is not above the floor anyway (a clock
 * behind), the token is floor + FENCED_REPAIR_GAP + TIME, well above the
 * floor (repaired = 1); two such repairs from the same floor are ordered by the clock, as
 * the rule's tokens are, even when the counter that held the first one
 * was lost and nothing else recorded it.
 *
 * A repaired counter is ahead of the clock by more than the repair gap
 * (mark + gap + TIME, for a mark at or above TIME), and so are the tokens
 * counted on from it: the clock no longer orders them, and only the
 * database's mark, raised at each acquisition, records them.  Where the
 * caller does not raise the mark (ARGV[4] set), such a token is refused
 * rather than issued: a loss of the counter's last grants (a failover to a
 * replica behind, an older snapshot) would bring it back to a value still
 * above the mark, nothing would repair it, and the tokens lost would be
 * issued again.  A repair itself is never refused: it is ordered by TIME.
 *
 * Arithmetic is on decimal strings: a counter may exceed 2^53, beyond
 * which Lua's numbers (doubles) are not exact.
 */
#define FENCED_ACQUIRE_LUA \
"-- fencing key layout v1: acquire\n" \
"local gap = '" FENCED_REPAIR_GAP_TEXT "'\n" \
"local held = redis.call('GET', KEYS[1])\n" \
"if held then\n" \
"  local mine = false\n" \
"  for i = 6, #ARGV do\n" \
"    if held == ARGV[i] then mine = true end\n" \
"  end\n" \
"  if not mine then\n" \
"    return {0, redis.call('PTTL', KEYS[1])}\n" \
"  end\n" \
"end\n" \
FENCED_ACQUIRE_GRANT_LUA("")

/*
 * The part of both acquire scripts that computes the token and takes the
 * lock, once the lock is found free or the caller's (KEYS[1], KEYS[2] and
 * ARGV[1..5] as above; local gap defined).  dequeue is Lua run after every
 * check and before the writes that take the lock: the fair script's
 * leaving of its queue.
 */
#define FENCED_ACQUIRE_GRANT_LUA(dequeue) \
"local cur = redis.call('GET', KEYS[2])\n" \
"if cur and not (cur == '0' or (#cur <= 19 and string.find(cur, '^[1-9]%d*$'))) then\n" \
"  return redis.error_reply('ERR fencing: token counter ' .. KEYS[2] .. ' does not hold a non-negative integer')\n" \
"end\n" \
"local function below(a, b)\n" \
"  if #a ~= #b then return #a < #b end\n" \
"  for i = 1, #a do\n" \
"    local x, y = string.byte(a, i), string.byte(b, i)\n" \
"    if x ~= y then return x < y end\n" \
"  end\n" \
"  return false\n" \
"end\n" \
"local function succ(a)\n" \
"  local i = #a\n" \
"  while i > 0 and string.byte(a, i) == 57 do i = i - 1 end\n" \
"  if i == 0 then return '1' .. string.rep('0', #a) end\n" \
"  return string.sub(a, 1, i - 1) .. string.char(string.byte(a, i) + 1) .. string.rep('0', #a - i)\n" \
"end\n" \
"local function add(a, b)\n" \
"  local r, carry, i, j = {}, 0, #a, #b\n" \
"  while i > 0 or j > 0 or carry > 0 do\n" \
"    local d = carry\n" \
"    if i > 0 then d = d + string.byte(a, i) - 48 end\n" \
"    if j > 0 then d = d + string.byte(b, j) - 48 end\n" \
"    r[#r + 1] = string.char(48 + d % 10)\n" \
"    carry = (d - d % 10) / 10\n" \
"    i = i - 1\n" \
"    j = j - 1\n" \
"  end\n" \
"  return string.reverse(table.concat(r))\n" \
"end\n" \
"local t = redis.call('TIME')\n" \
"local token = succ(cur or '0')\n" \
"local now = t[1] .. string.rep('0', 6 - #t[2]) .. t[2]\n" \
"if below(token, now) then token = now end\n" \
"local rule = token\n" \
"local repaired = 0\n" \
"if ARGV[3] ~= '' and not below(ARGV[3], token) then\n" \
"  token = add(add(ARGV[3], gap), now)\n" \
"  repaired = 1\n" \
"elseif ARGV[4] ~= '' and below(add(now, gap), token) then\n" \
"  return {2, token, now}\n" \
"end\n" \
"if below('9223372036854775807', token) then\n" \
"  return redis.error_reply('ERR fencing: token counter ' .. KEYS[2] .. ' would overflow')\n" \
"end\n" \
dequeue \
"if ARGV[5] == '' then\n" \
"  redis.call('SET', KEYS[2], token)\n" \
"else\n" \
"  redis.call('SET', KEYS[2], token, 'PX', ARGV[5])\n" \
"end\n" \
"redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])\n" \
"return {1, token, repaired, rule}\n"

/*
 * How long a fair waiter keeps its place in the queue without asking
 * again, in ms.  A waiter asks at least once a second (FENCED_WAKE_MAX_SLEEP,
 * lock_acquire.c); one that stopped asking (its backend ended, its wait
 * ended without word) loses its place this long after its last attempt,
 * and the queue goes on without it.
 */
#define FENCED_FAIR_WAITER_TIMEOUT		3000
#define FENCED_FAIR_WAITER_TIMEOUT_TEXT	"3000"

/*
 * fair acquire
 *	KEYS[1] lock key, KEYS[2] token counter key, KEYS[3] queue (a list of
 *	waiters, the first in line first), KEYS[4] the waiters' timeouts (a
 *	sorted set: waiter -> Redis time in ms past which it loses its place);
 *	all four in one hash slot (fenced_queue_keys, lock_settings.c)
 *	ARGV[1..5] as for acquire, ARGV[6] the waiter (one string for the
 *	whole acquisition), ARGV[7..] owners under which the caller may
 *	already hold the lock
 *
 * First the waiters at the head whose timeout has passed are dropped.
 * The lock is then granted, by the acquire script's own code, when it is
 * the caller's already, or free with nobody in line or the caller first
 * in line; the caller then leaves the queue.  Otherwise the caller joins
 * the end of the line (or keeps its place) with a timeout of
 * FENCED_FAIR_WAITER_TIMEOUT from now, and the reply is {0, ms}: the
 * lock's PTTL, or, the lock free but another's turn, the time left before
 * the first in line loses its place.  Both queue keys expire
 * FENCED_FAIR_WAITER_TIMEOUT after the last waiter asked.
 *
 * The plain acquire script does not read the queue: an acquisition
 * without fair mode takes a free lock whoever waits in line.
 */
#define FENCED_ACQUIRE_FAIR_LUA \
"-- fencing key layout v1: fair acquire\n" \
"local gap = '" FENCED_REPAIR_GAP_TEXT "'\n" \
"local t0 = redis.call('TIME')\n" \
"local ms = tonumber(t0[1]) * 1000 + math.floor(tonumber(t0[2]) / 1000)\n" \
"local me = ARGV[6]\n" \
"while true do\n" \
"  local first = redis.call('LINDEX', KEYS[3], 0)\n" \
"  if not first then break end\n" \
"  local limit = redis.call('ZSCORE', KEYS[4], first)\n" \
"  if limit and tonumber(limit) > ms then break end\n" \
"  redis.call('LPOP', KEYS[3])\n" \
"  redis.call('ZREM', KEYS[4], first)\n" \
"end\n" \
"local held = redis.call('GET', KEYS[1])\n" \
"local mine = false\n" \
"if held then\n" \
"  for i = 7, #ARGV do\n" \
"    if held == ARGV[i] then mine = true end\n" \
"  end\n" \
"end\n" \
"local head = redis.call('LINDEX', KEYS[3], 0)\n" \
"if (held and not mine) or (not held and head and head ~= me) then\n" \
"  if not redis.call('ZSCORE', KEYS[4], me) then\n" \
"    redis.call('RPUSH', KEYS[3], me)\n" \
"  end\n" \
"  redis.call('ZADD', KEYS[4], ms + " FENCED_FAIR_WAITER_TIMEOUT_TEXT ", me)\n" \
"  redis.call('PEXPIRE', KEYS[3], " FENCED_FAIR_WAITER_TIMEOUT_TEXT ")\n" \
"  redis.call('PEXPIRE', KEYS[4], " FENCED_FAIR_WAITER_TIMEOUT_TEXT ")\n" \
"  if held then\n" \
"    return {0, redis.call('PTTL', KEYS[1])}\n" \
"  end\n" \
"  return {0, math.max(tonumber(redis.call('ZSCORE', KEYS[4], head)) - ms, 1)}\n" \
"end\n" \
FENCED_ACQUIRE_GRANT_LUA( \
"redis.call('LREM', KEYS[3], 1, me)\n" \
"redis.call('ZREM', KEYS[4], me)\n")

/*
 * leave the queue
 *	KEYS[1] queue, KEYS[2] waiters' timeouts;
 *	ARGV[1] 'PUBLISH', 'SPUBLISH' or '' and ARGV[2] the release channel,
 *	as for release; ARGV[3] the waiter
 *
 * Sent by a fair waiter whose wait ended without the lock.  When it was
 * first in line, the waiters are told on the release channel, for the
 * next in line to try at once rather than at the leaver's timeout.
 * Returns 1 when the waiter was in the queue, 0 otherwise.
 */
#define FENCED_LEAVE_QUEUE_LUA \
"-- fencing key layout v1: leave the queue\n" \
"local first = redis.call('LINDEX', KEYS[1], 0) == ARGV[3]\n" \
"local n = redis.call('LREM', KEYS[1], 1, ARGV[3])\n" \
"redis.call('ZREM', KEYS[2], ARGV[3])\n" \
"if first and ARGV[1] ~= '' then redis.pcall(ARGV[1], ARGV[2], '1') end\n" \
"return n\n"

/*
 * extend
 *	KEYS[1] lock key; ARGV[1] owner, ARGV[2] ttl in ms
 *
 * Returns 1 when the lock was still the owner's and now expires ttl from
 * now, 0 otherwise.
 */
#define FENCED_EXTEND_LUA \
"-- fencing key layout v1: extend\n" \
"if redis.call('GET', KEYS[1]) == ARGV[1] then\n" \
"  return redis.call('PEXPIRE', KEYS[1], ARGV[2])\n" \
"end\n" \
"return 0\n"

/*
 * extend the counter
 *	KEYS[1] token counter key; ARGV[1] its lifetime in ms
 *
 * Sent before the extend script, on its own: one key, so that it needs no
 * other key in the same node during a slot migration.  A counter that
 * expires sooner than ARGV[1] from now then expires ARGV[1] from now, so
 * that a lock extended past its counter's lifetime never outlives it; a
 * counter without expiry (shared with other clients) or none at all is
 * left so.  Returns 1 when it set the expiry, 0 otherwise.  (PEXPIRE ...
 * GT would do on Redis 7.0 and later only.)
 */
#define FENCED_EXTEND_COUNTER_LUA \
"-- fencing key layout v1: extend the counter\n" \
"local left = redis.call('PTTL', KEYS[1])\n" \
"if left >= 0 and left < tonumber(ARGV[1]) then\n" \
"  return redis.call('PEXPIRE', KEYS[1], ARGV[1])\n" \
"end\n" \
"return 0\n"

/*
 * release
 *	KEYS[1] lock key;
 *	ARGV[1] 'PUBLISH', 'SPUBLISH' (Cluster mode) or '' for no notice,
 *	ARGV[2] the channel of the release notice (fenced_release_channel),
 *	ARGV[3..] owners under which the caller may hold it
 *
 * Returns 1 when the lock was the caller's and is now deleted, 0
 * otherwise; never deletes another owner's lock.  A deleted lock is
 * announced on the channel, for the waiters of the resource to try again
 * at once; through redis.pcall, so that a user whose ACL denies the
 * channel, or a server without SPUBLISH, still releases (its waiters
 * then wake at the lock's PTTL).
 */
#define FENCED_RELEASE_LUA \
"-- fencing key layout v1: release\n" \
"local held = redis.call('GET', KEYS[1])\n" \
"if held then\n" \
"  for i = 3, #ARGV do\n" \
"    if held == ARGV[i] then\n" \
"      redis.call('DEL', KEYS[1])\n" \
"      if ARGV[1] ~= '' then redis.pcall(ARGV[1], ARGV[2], '1') end\n" \
"      return 1\n" \
"    end\n" \
"  end\n" \
"end\n" \
"return 0\n"

#endif							/* FENCED_LOCK_SCRIPTS_H */
