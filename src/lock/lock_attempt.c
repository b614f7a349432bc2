/*-------------------------------------------------------------------------
 *
 * lock_attempt.c
 *	  One attempt at a lock: the acquire script, its token, and whether an
 *	  attempt that failed may have run.
 *
 * One acquisition is one round trip: a Lua script (lock_scripts.h)
 * that takes the lock with the caller's owner string and a TTL and issues
 * the next token, atomically.
 *
 * Tokens.  Redis can lose the counter's latest value (restart without
 * persistence or from an older snapshot, failover to a replica that was
 * behind, FLUSHALL).  A plain counter would then hand the next holder a
 * token already handed out, or below tokens the database has accepted,
 * and fencing would turn upside down: the new holder rejected, the stale
 * one let through.  So a token is max(counter + 1, microseconds of the
 * Redis server's clock): after a loss the clock, not the lost counter,
 * puts it above every token issued before, as long as the clocks of the
 * Redis servers agree to within a failover's duration (doc/lock-failures.md, "Tokens").
 *
 * Counter regression.  In case that clock is behind, every acquisition
 * passes the resource's newest high-water mark (committed or in progress,
 * never a snapshot's) to the script, which raises the counter past it,
 * under the lock, before issuing the token; a WARNING says it happened.
 * The repaired token adds the Redis clock, so that a second repair from
 * the same mark never issues the first one's token again
 * (FENCED_REPAIR_GAP, lock_scripts.h).
 *
 * A repaired counter.  The tokens counted on from a repaired counter are
 * above the clock, and only the raise at acquisition records them; with
 * fencing.acquire_raises_mark off, the script refuses them (TF120) rather
 * than leave Redis their only record.  A token at or below the mark the
 * script was given is never taken: the script never returns one, so the
 * server does not run it as sent (TF121, at once, without a give-back).
 *
 * Fair mode.  A fair attempt runs the fair acquire script instead, with
 * the waiter string of its acquisition, which keeps the waiter's place in
 * the queue beside the lock (lock_scripts.h) from one attempt to the
 * next; a waiter whose wait ends without the lock leaves the queue
 * (fenced_leave_queue).
 *
 * IDENTIFICATION
 *	  src/lock/lock_attempt.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xlog.h"
#include "common/pg_prng.h"
#include "core/core.h"
#include "fencing_errcodes.h"
#include "lock/lock_int.h"
#include "lock/lock_scripts.h"
#include "marks/marks.h"
#include "miscadmin.h"
#include "redis/redis.h"
#include "stats/stats.h"

/* Whether the current attempt has been handed to Redis. */
static bool attempt_sent = false;

static RedisScript acquire_script = {"fencing acquire script", FENCED_ACQUIRE_LUA, ""};
static RedisScript fair_script = {"fencing fair acquire script", FENCED_ACQUIRE_FAIR_LUA, ""};
static RedisScript leave_script = {"fencing leave-queue script", FENCED_LEAVE_QUEUE_LUA, ""};

/*
 * fenced_make_owner
 *		A new owner string: unique across servers, backends and
 *		acquisitions, and saying which server and backend holds the lock.
 */
void
fenced_make_owner(char *owner)
{
	static uint64 acquisitions = 0;

	snprintf(owner, FENCED_OWNER_LEN, "pg:" UINT64_FORMAT ":%d:" UINT64_FORMAT ":%016llx",
			 GetSystemIdentifier(), MyProcPid, ++acquisitions,
			 (unsigned long long) pg_prng_uint64(&pg_global_prng_state));
}


/* Parse a token sent back by the acquire script. */
static FenceToken
fenced_parse_token(const RedisValue *v, const char *what)
{
	FenceToken	token = 0;

	if (v->type != REDIS_VALUE_STRING ||
		!fence_token_from_cstring(v->str, &token))
		redis_unexpected(acquire_script.name, what, v);
	return token;
}
/*
 * fenced_may_have_run
 *		Whether the acquire script may have run in Redis although the call
 *		failed with edata.
 *
 * Called for an attempt handed to the connection module.  Not when Redis
 * answered with an error (the script took no lock under our owner), nor
 * when the command never reached the socket (no connection, AUTH refused,
 * an unusable password file), which the transport knows.  Anything else
 * -- a timeout, a lost connection, a protocol error, a cancel -- may have
 * come after the script ran.
 */
static bool
fenced_script_may_have_run(const ErrorData *edata)
{
	switch (edata->sqlerrcode)
	{
		case ERRCODE_FENCING_REDIS_BUSY:
		case ERRCODE_FENCING_REDIS_CLUSTER_CHANGING:
		case ERRCODE_FENCING_REDIS_REFUSED:
		case ERRCODE_FENCING_REDIS_NOT_REPLICATED:
			return false;
		default:
			return redis_call_sent();
	}
}
/*
 * fenced_refuse_repaired
 *		The script refused a token counted on from a repaired counter (the
 *		raise at acquisition off): say so, naming the resource.
 */
pg_noreturn static void
fenced_refuse_repaired(const char *resource, const RedisValue *reply)
{
	FenceToken	would = fenced_parse_token(reply->elements[1], "a token");
	FenceToken	clock = fenced_parse_token(reply->elements[2], "the Redis clock");

	ereport(ERROR,
			(errcode(ERRCODE_FENCING_REPAIRED_COUNTER),
			 errmsg("token counter in Redis for resource \"%s\" was repaired past its high-water mark: its next token would be recorded by Redis alone",
					resource),
			 errdetail("The next token, " UINT64_FORMAT ", is ahead of the Redis clock (" UINT64_FORMAT ") by more than %d: with fencing.acquire_raises_mark off no mark records it, and Redis losing its last writes would issue it again.",
					   (uint64) would, (uint64) clock, FENCED_REPAIR_GAP),
			 errhint("Acquire this resource with fencing.acquire_raises_mark on.")));
}

/*
 * fenced_token_not_above
 *		The server returned a token at or below the mark passed as the
 *		floor, which the script never does: an error naming the counter
 *		problem.  The owner is kept by the caller for the lock's TTL (the
 *		attempt was sent); no give-back is waited for.
 */
pg_noreturn static void
fenced_token_not_above(const char *resource, const char *token_key,
					   FenceToken token, const char *floor)
{
	const char *host;
	int			port;
	const char *server = "?";

	/* named as the Redis client names servers: a socket path, or host:port */
	if (redis_last_server(&host, &port))
		server = host[0] == '/' ? host :
			strchr(host, ':') != NULL ? psprintf("[%s]:%d", host, port) :
			psprintf("%s:%d", host, port);
	ereport(ERROR,
			(errcode(ERRCODE_FENCING_TOKEN_NOT_ABOVE_MARK),
			 errmsg("Redis server at \"%s\" issued token " UINT64_FORMAT " for resource \"%s\", not above its high-water mark %s",
					server, (uint64) token, resource, floor),
			 errdetail("The fencing acquire script repairs a token counter that is not above the mark it is given; this one was not repaired (token counter key \"%s\").",
					   token_key),
			 errhint("Check that the server is Redis and runs scripts unchanged, and what writes the token counter key.")));
}

/*
 * fenced_try_acquire
 *		One attempt: the script with the newest high-water mark as the
 *		floor, and the owners of lease (if any) as ours to take over; with
 *		a waiter, the fair script, for that waiter.  True and *token when
 *		the lock was taken; false and *pttl when it is busy (or, fair, not
 *		yet the waiter's turn).
 */
bool
fenced_try_acquire(const char *resource, const char *lock_key,
				   const char *token_key, const char *owner,
				   const char *waiter, int ttl_ms, Lease *lease,
				   FenceToken *token, long long *pttl)
{
	RedisScript *script = waiter != NULL ? &fair_script : &acquire_script;
	FenceToken	mark;
	FenceToken	floor_token;
	bool		has_mark;
	char		floor[FENCE_TOKEN_TEXT_LEN] = "";
	char		ttl[12];
	char		counter_ttl[24] = "";
	const char *keys[4];
	const char *args[7 + FENCED_MAX_UNKNOWN_OWNERS];
	int			nargs = 0;
	int			i;
	RedisValue *reply;
	RedisValue **e;

	has_mark = marks_read_newest(resource, &mark);
	if (marks_floor_get(resource, &floor_token) &&
		(!has_mark || floor_token > mark))
	{
		/* an acquisition in progress holds a newer token than the mark */
		mark = floor_token;
		has_mark = true;
	}
	if (has_mark)
		fence_token_to_cstring(mark, floor);
	snprintf(ttl, sizeof(ttl), "%d", ttl_ms);
	(void) fenced_counter_lifetime(ttl_ms, counter_ttl, sizeof(counter_ttl));

	keys[0] = lock_key;
	keys[1] = token_key;
	args[nargs++] = owner;
	args[nargs++] = ttl;
	args[nargs++] = floor;
	args[nargs++] = fencing_acquire_raises_mark ? "" : "1";
	args[nargs++] = counter_ttl;
	if (waiter != NULL)
	{
		keys[2] = fenced_queue_keys(lock_key, (char **) &keys[3]);
		args[nargs++] = waiter;
	}
	if (lease != NULL && lease->held)
		args[nargs++] = lease->owner;
	for (i = 0; lease != NULL && i < lease->nunknown; i++)
		args[nargs++] = lease->unknown[i];

	attempt_sent = true;
	reply = redis_eval(script, waiter != NULL ? 4 : 2, keys, nargs, args);
	e = reply->elements;
	if (reply->type != REDIS_VALUE_ARRAY || reply->nelements < 2 ||
		e[0]->type != REDIS_VALUE_INTEGER || e[1]->type == REDIS_VALUE_ARRAY)
		redis_unexpected(script->name, "{taken, ...}", reply);

	if (e[0]->integer == 0)
	{
		if (e[1]->type != REDIS_VALUE_INTEGER)
			redis_unexpected(script->name, "the lock's PTTL", e[1]);
		*pttl = e[1]->integer;
		attempt_sent = false;	/* answered: it took nothing */
		return false;
	}
	if (e[0]->integer == 2 && reply->nelements == 3)
	{
		attempt_sent = false;	/* refused: it took nothing */
		fenced_refuse_repaired(resource, reply);
	}

	if (reply->nelements != 4 || e[2]->type != REDIS_VALUE_INTEGER)
		redis_unexpected(script->name, "{1, token, repaired, rule's token}", reply);
	*token = fenced_parse_token(e[1], "a token");
	if (has_mark && *token <= mark)
		fenced_token_not_above(resource, token_key, *token, floor);

	if (e[2]->integer != 0)
	{
		FenceToken	would = fenced_parse_token(e[3], "a token");
		char		would_text[FENCE_TOKEN_TEXT_LEN];
		char		issued[FENCE_TOKEN_TEXT_LEN];

		fence_token_to_cstring(would, would_text);
		fence_token_to_cstring(*token, issued);
		stats_redis_count(STATS_REDIS_REPAIRED);
		ereport(WARNING,
				(errmsg("token counter in Redis for resource \"%s\" went backwards: next token %s is not above the high-water mark %s",
						resource, would_text, floor),
				 errdetail("The counter was set to the mark plus %d plus the Redis clock, above any token it may have handed out before it went back and any token repaired before, and token %s issued instead.",
						   FENCED_REPAIR_GAP, issued),
				 errhint("Redis lost writes or its clock is behind the clock that issued the mark's token; check its persistence, replication and clock.")));
	}
	return true;
}

/*
 * fenced_leave_queue
 *		Best effort, for a fair waiter whose wait ended without the lock:
 *		leave the queue of the lock at lock_key, so that those behind need
 *		not wait for the waiter's timeout.  Never an error of its own: a
 *		waiter not heard from loses its place at its timeout anyway.
 */
void
fenced_leave_queue(const char *lock_key, const char *waiter)
{
	MemoryContext cxt = CurrentMemoryContext;
	const char *keys[2];
	const char *args[FENCED_NOTICE_NARGS + 1];

	keys[0] = fenced_queue_keys(lock_key, (char **) &keys[1]);
	fenced_release_notice(lock_key, args);
	args[FENCED_NOTICE_NARGS] = waiter;
	PG_TRY();
	{
		(void) redis_eval(&leave_script, 2, keys, FENCED_NOTICE_NARGS + 1,
						  args);
	}
	PG_CATCH();
	{
		/* nothing is held across the call; the caller goes on */
		MemoryContextSwitchTo(cxt);
		FlushErrorState();
	}
	PG_END_TRY();
}

/* The next attempt has not been sent yet. */
void
fenced_attempt_start(void)
{
	attempt_sent = false;
}

/*
 * fenced_attempt_may_have_run
 *		Whether the attempt that failed with edata may have taken the lock.
 */
bool
fenced_attempt_may_have_run(const ErrorData *edata)
{
	return attempt_sent && fenced_script_may_have_run(edata);
}
