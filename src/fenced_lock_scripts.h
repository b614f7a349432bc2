/*-------------------------------------------------------------------------
 *
 * fenced_lock_scripts.h
 *	  The Lua scripts of key layout v1: acquire, extend, release.
 *
 * Plain C string constants with no PostgreSQL dependency, so that the
 * benchmark (test/bench/acquire) can send byte-identical scripts, with the
 * same SHA1, from a bare hiredis client.
 *
 * Every key a script touches is passed in KEYS, as Redis ACLs and Cluster
 * routing require.  The lock key holds the owner string with a PX expiry;
 * the token counter key holds a decimal integer and never expires.
 *
 * Tokens travel back as strings (the reply of GET), never as Lua numbers:
 * Redis converts integer replies to Lua numbers, which are doubles, and a
 * counter above 2^53 would silently lose its low bits.  For the same
 * reason the counter is compared with the floor as a decimal string.
 *
 * A script is atomic but not transactional: when a command in it fails,
 * the writes before it stay.  The acquire script therefore checks the
 * lock and validates the counter before it writes anything, takes the
 * token (INCR, which fails cleanly on a counter that is not an integer or
 * would overflow) before it sets the lock, and sets the lock last.
 *
 * IDENTIFICATION
 *	  src/fenced_lock_scripts.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef FENCED_LOCK_SCRIPTS_H
#define FENCED_LOCK_SCRIPTS_H

/*
 * acquire
 *	KEYS[1] lock key, KEYS[2] token counter key
 *	ARGV[1] new owner, ARGV[2] ttl in ms,
 *	ARGV[3] floor: the database's high-water mark, or '' for none,
 *	ARGV[4] where to set a counter found below the floor,
 *	ARGV[5..] owners under which the caller may already hold the lock (an
 *		acquisition whose reply was lost, or a lease being re-acquired)
 *
 * Returns {1, token, repaired, previous counter or ''} when the lock was
 * taken, {0, PTTL of the lock} when it is busy.  When the counter would
 * issue a token at or below the floor, it is first set to ARGV[4], well
 * above the floor (repaired = 1), so that the token is above every token
 * the database has accepted and every token the lost counter may have
 * handed out without its holder having written yet.
 */
#define FENCED_ACQUIRE_LUA \
"-- fencing key layout v1: acquire\n" \
"local held = redis.call('GET', KEYS[1])\n" \
"if held then\n" \
"  local mine = false\n" \
"  for i = 5, #ARGV do\n" \
"    if held == ARGV[i] then mine = true end\n" \
"  end\n" \
"  if not mine then\n" \
"    return {0, redis.call('PTTL', KEYS[1])}\n" \
"  end\n" \
"end\n" \
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
"local repaired = 0\n" \
"if ARGV[3] ~= '' and below(cur or '0', ARGV[3]) then\n" \
"  redis.call('SET', KEYS[2], ARGV[4])\n" \
"  repaired = 1\n" \
"end\n" \
"redis.call('INCR', KEYS[2])\n" \
"redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])\n" \
"return {1, redis.call('GET', KEYS[2]), repaired, cur or ''}\n"

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
 * release
 *	KEYS[1] lock key; ARGV[1..] owners under which the caller may hold it
 *
 * Returns 1 when the lock was the caller's and is now deleted, 0
 * otherwise; never deletes another owner's lock.
 */
#define FENCED_RELEASE_LUA \
"-- fencing key layout v1: release\n" \
"local held = redis.call('GET', KEYS[1])\n" \
"if held then\n" \
"  for i = 1, #ARGV do\n" \
"    if held == ARGV[i] then return redis.call('DEL', KEYS[1]) end\n" \
"  end\n" \
"end\n" \
"return 0\n"

#endif							/* FENCED_LOCK_SCRIPTS_H */
