/*-------------------------------------------------------------------------
 *
 * fencing_errcodes.h
 *	  Every SQLSTATE the extension defines, and the standard ones it reuses
 *	  under a name that says what it means here.
 *
 * Our codes live in class TF ("token, fencing"): a class beginning with a
 * letter from I to Z is implementation-defined (errcodes.txt), and
 * PostgreSQL uses none beginning with T.  Nothing of ours is in class 08
 * or 57P01-57P03: JDBC pools (HikariCP) and others take those for a dead
 * database connection and evict it, and Redis trouble is not that.  Nor
 * in 0A000, which pools treat the same way.
 *
 * The table is stable from version 1.1 on; README.md and doc/operations.md
 * list it.
 *
 * IDENTIFICATION
 *	  src/fencing_errcodes.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef FENCING_ERRCODES_H
#define FENCING_ERRCODES_H

/* A write was rejected: the application's lock is gone; do not retry. */
#define ERRCODE_FENCING_STALE_TOKEN		MAKE_SQLSTATE('T','F','0','0','1')
/* A write to a fenced table carried no token: a bug in the application. */
#define ERRCODE_FENCING_NO_TOKEN		MAKE_SQLSTATE('T','F','0','0','2')
/* A guarded table is set up in a way the guard cannot fence: for the DBA. */
#define ERRCODE_FENCING_GUARD_MISCONFIGURED MAKE_SQLSTATE('T','F','0','0','3')
/* A DDL command would silently unfence a table. */
#define ERRCODE_FENCING_DDL_UNFENCES	MAKE_SQLSTATE('T','F','0','0','4')
/* A session declaration or session lease while fencing.allow_session_state
 * is off: the application must use the transaction forms. */
#define ERRCODE_FENCING_SESSION_STATE_NOT_ALLOWED MAKE_SQLSTATE('T','F','0','0','5')
/* A fence_guard() trigger with an UPDATE OF list or a WHEN condition. */
#define ERRCODE_FENCING_GUARD_SHAPE		MAKE_SQLSTATE('T','F','0','1','0')
/* A token only the statement supplies, above fencing.max_token_step over
 * the mark. */
#define ERRCODE_FENCING_TOKEN_STEP		MAKE_SQLSTATE('T','F','0','1','1')
/* TRUNCATE of the marks table (the trigger is SQL: fencing--1.2--1.3.sql). */
#define ERRCODE_FENCING_MARKS_TRUNCATE	MAKE_SQLSTATE('T','F','0','1','2')
/* A foreign table where a guard would have to fence it. */
#define ERRCODE_FENCING_FOREIGN_TABLE	MAKE_SQLSTATE('T','F','0','1','3')
/* DDL that would rename the resources of a guarded table's rows. */
#define ERRCODE_FENCING_RESOURCE_RENAME	MAKE_SQLSTATE('T','F','0','1','4')
/* A view's DEFAULT would stand in for a guarded table's token. */
#define ERRCODE_FENCING_VIEW_DEFAULT	MAKE_SQLSTATE('T','F','0','1','5')
/* A placeholder's value containing the separator after it in the template. */
#define ERRCODE_FENCING_AMBIGUOUS_NAME	MAKE_SQLSTATE('T','F','0','1','6')

/* This build of fencing has no Redis support (built without hiredis). */
#define ERRCODE_FENCING_REDIS_NOT_BUILT	MAKE_SQLSTATE('T','F','1','0','0')
/* Redis could not be reached, or did not answer in time: retry later. */
#define ERRCODE_FENCING_REDIS_UNAVAILABLE MAKE_SQLSTATE('T','F','1','0','1')
/* Redis is up but cannot serve now (LOADING, BUSY, MASTERDOWN, READONLY
 * during a failover): retry soon. */
#define ERRCODE_FENCING_REDIS_BUSY		MAKE_SQLSTATE('T','F','1','0','2')
/* A Redis Cluster is moving slots or has lost a primary (TRYAGAIN,
 * CLUSTERDOWN, a redirect after the retry): retry soon. */
#define ERRCODE_FENCING_REDIS_CLUSTER_CHANGING MAKE_SQLSTATE('T','F','1','0','3')
/* Redis refused us by configuration: authentication, ACL, maxmemory,
 * conflicting settings: for the operator, retrying will not help. */
#define ERRCODE_FENCING_REDIS_REFUSED	MAKE_SQLSTATE('T','F','1','0','4')
/* Whatever answered does not speak Redis as we expect, or sent a reply
 * over the size limits. */
#define ERRCODE_FENCING_REDIS_PROTOCOL	MAKE_SQLSTATE('T','F','1','0','5')
/* WAIT did not reach fencing.redis_wait_replicas replicas in time; the
 * lock was given back: retry later. */
#define ERRCODE_FENCING_REDIS_NOT_REPLICATED MAKE_SQLSTATE('T','F','1','0','6')
/* The TLS handshake with a Redis server failed, or its certificate did
 * not verify, or it refused ours: for the operator (certificates,
 * fencing.redis_tls*), retrying will not help. */
#define ERRCODE_FENCING_REDIS_TLS		MAKE_SQLSTATE('T','F','1','0','7')
/* renew => true where leases cannot be renewed: the library is not in
 * shared_preload_libraries, track_activities is off, or the session's
 * Redis settings are not the server's configuration the renewer uses. */
#define ERRCODE_FENCING_RENEW_UNAVAILABLE MAKE_SQLSTATE('T','F','1','0','8')
/* renew => true with the shared table of lock holders full
 * (fencing.max_leases): raise it, or acquire without renew. */
#define ERRCODE_FENCING_LEASE_TABLE_FULL MAKE_SQLSTATE('T','F','1','0','9')
/* This transaction held a lock whose lease ended while it stalled, and a
 * newer holder of the resource, waiting for it, ended it: its work is
 * rolled back; acquire the lock again, and read again. */
#define ERRCODE_FENCING_TAKEN_OVER		MAKE_SQLSTATE('T','F','1','1','0')
/* A token would be counted on from a repaired counter (ahead of the Redis
 * clock) while fencing.acquire_raises_mark is off: only Redis would record
 * it, and a loss would issue it again; nothing was taken. */
#define ERRCODE_FENCING_REPAIRED_COUNTER MAKE_SQLSTATE('T','F','1','2','0')
/* The server returned a token at or below the mark the acquire script was
 * given: not Redis running the script, or a counter written by another
 * client behind the script's back. */
#define ERRCODE_FENCING_TOKEN_NOT_ABOVE_MARK MAKE_SQLSTATE('T','F','1','2','1')
/* fenced_acquire_xact(text[]) of a set with a resource this session holds
 * already: the set is taken all or none, and giving it back would end a
 * lease taken before; nothing was taken. */
#define ERRCODE_FENCING_LOCK_ALREADY_HELD MAKE_SQLSTATE('T','F','1','3','0')

/* A statement run while a lease taken with on_lost => 'error' is lost: its
 * renewer found the lock another's, or it ran out without renewal (Redis
 * unreachable); reported once per lease, by the next statement or COMMIT. */
#define ERRCODE_FENCING_LOCK_LOST MAKE_SQLSTATE('T','F','1','3','1')

/*
 * Standard codes we reuse where they mean exactly that:
 *	22023 invalid_parameter_value, 22004 null_value_not_allowed,
 *	22P02/22003 token input, 42501 insufficient_privilege,
 *	42703 undefined_column, 42804 datatype_mismatch,
 *	39P01 trigger_protocol_violated, 54000 program_limit_exceeded (a
 *	resource name over FENCING_RESOURCE_MAX_BYTES), 25000/25001/25006
 *	transaction state, F0000 config_file_error (the password file),
 *	53200 out_of_memory, 40001 serialization_failure.
 */

#endif							/* FENCING_ERRCODES_H */
