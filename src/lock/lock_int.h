/*-------------------------------------------------------------------------
 *
 * lock_int.h
 *	  Inside the lock layer, for its own files, bottom to top: the lock
 *	  settings, SQL arguments, Redis keys and release channel of a resource
 *	  (lock_settings.c; the Lua scripts are in lock_scripts.h); the shared
 *	  table of every backend's leases (lease_shmem.c); what this session
 *	  holds or may hold, leases and the owners of attempts whose outcome
 *	  is unknown (lease_table.c); one attempt (lock_attempt.c); the
 *	  acquire protocol and its waits (lock_acquire.c); releases where
 *	  nothing may throw (lease_release.c); the renewer (lease_renewer.c).
 *
 * IDENTIFICATION
 *	  src/lock/lock_int.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef FENCING_LOCK_LOCK_INT_H
#define FENCING_LOCK_LOCK_INT_H

#include "core/core.h"
#include "datatype/timestamp.h"
#include "fmgr.h"
#include "nodes/pg_list.h"
#include "redis/redis.h"
#include "storage/latch.h"
#include "storage/spin.h"

extern char *fencing_redis_lock_key;
extern char *fencing_redis_token_key;
extern int	fencing_redis_wait_replicas;
extern int	fencing_redis_wait_timeout;
extern bool fencing_acquire_raises_mark;

/* fencing.lock_wait_wakeup: what ends a waiter's sleep on a busy lock */
typedef enum FencedWakeup
{
	FENCED_WAKEUP_RELEASE,		/* the release's notice, else the lock's PTTL */
	FENCED_WAKEUP_POLL			/* the back-off alone */
} FencedWakeup;

extern int	fencing_lock_wait_wakeup;

extern char *fenced_resource_arg(FunctionCallInfo fcinfo);
extern int	fenced_ttl_arg(FunctionCallInfo fcinfo, int argno);
extern int	fenced_use_lease_arg(FunctionCallInfo fcinfo, int argno,
								 bool has_token);
extern int	fenced_wait_arg(FunctionCallInfo fcinfo, int argno);
extern bool fenced_renew_arg(FunctionCallInfo fcinfo, int argno);
extern int	fenced_max_hold_arg(FunctionCallInfo fcinfo, int argno);

/* What a caller asks of one acquisition, from its SQL arguments. */
typedef struct FencedAcquireOptions
{
	int			ttl_ms;
	int			wait_ms;
	bool		xact;			/* for the transaction, not the session */
	bool		renew;			/* renewed while its owner works */
	int			max_hold_ms;	/* renewed no longer after acquisition */
	bool		fair;			/* first come, first served among waiters */
	bool		on_lost_error;	/* the next statement fails once it is lost */
} FencedAcquireOptions;

extern void fenced_options_args(FunctionCallInfo fcinfo, bool xact,
								FencedAcquireOptions *opts);
extern char *fenced_keys(const char *resource, char **token_key);
extern char *fenced_key(const char *template, const char *resource);
extern char *fenced_queue_keys(const char *lock_key, char **timeouts_key);
extern bool fenced_counter_expires(void);
extern bool fenced_counter_lifetime(int ttl_ms, char *buf, size_t len);
extern int	fenced_counter_linger(void);

/* The arguments of the release script that say where to announce it. */
#define FENCED_NOTICE_NARGS		2

extern char *fenced_release_channel(const char *lock_key);
extern void fenced_release_notice(const char *lock_key, const char **args);

/* Owner strings (FENCED_OWNER_LEN, below). */
#define LEASE_SHMEM_OWNER_LEN		80

/* Key templates are at most this long (lock_settings.c checks). */
#define LEASE_SHMEM_TEMPLATE_LEN	1025

/*
 * One lease of one backend.  Written by its backend, and by the renewer
 * (expires, renewing, renewed, lost), each under mutex.  generation changes
 * whenever the slot stops describing the lease it did -- released, taken
 * again, freed -- so that the renewer, which reads a slot, talks to Redis
 * and then writes the outcome back, writes it only to the lease it read.
 */
typedef struct LeaseSlot
{
	slock_t		mutex;
	uint64		generation;
	bool		in_use;
	int			next_free;		/* free list, under the table's mutex */
	/* the owner backend */
	int			pid;
	TimestampTz backend_start;	/* against PID reuse */
	Oid			roleid;
	Oid			dbid;
	/* the lease */
	bool		xact;
	bool		renewing;
	bool		lost;			/* the renewer found the lock another's */
	bool		counter_expires;	/* token key is fencing's own */
	bool		declared;		/* a lease of fence_use(), not of Redis */
	FenceToken	token;
	int			ttl_ms;
	TimestampTz acquired;
	TimestampTz expires;		/* as last set, by our clock */
	TimestampTz renewed;		/* last acquisition or renewal */
	TimestampTz hold_until;		/* renewed no further: acquired + max_hold */
	char		owner[LEASE_SHMEM_OWNER_LEN];
	char		resource[FENCING_RESOURCE_MAX_BYTES + 1];
	char		lock_template[LEASE_SHMEM_TEMPLATE_LEN];
	char		token_template[LEASE_SHMEM_TEMPLATE_LEN];
} LeaseSlot;

/* A lease's place in the table, kept in its entry (Lease, below). */
typedef struct LeaseListing
{
	int			slot;			/* 1 + its slot, 0 if unlisted */
	uint64		generation;		/* the slot's, while it is ours */
} LeaseListing;

/* What a backend lists of one of its leases. */
typedef struct LeaseListed
{
	const char *resource;
	const char *owner;
	FenceToken	token;
	bool		xact;
	TimestampTz acquired;
	TimestampTz expires;
	int			ttl_ms;
	bool		renew;
	int			max_hold_ms;	/* with renew: renewed up to this after
								 * acquired */
	bool		declared;		/* a lease of fence_use() (lease_use.c) */
} LeaseListed;

extern void lease_shmem_init(void);
extern bool lease_shmem_enabled(void);
extern int	lease_shmem_size(void);
extern LeaseSlot *lease_shmem_slot(int i);
extern void lease_shmem_set_renewer(Latch *latch);
extern void lease_shmem_set_renewer_settings(uint64 fingerprint);
extern void lease_shmem_reserve(const LeaseListing *listing, bool renew);

extern void lease_shmem_publish(LeaseListing *listing, const LeaseListed *lease);
extern void lease_shmem_unpublish(LeaseListing *listing);
extern void lease_shmem_set_expires(const LeaseListing *listing,
									TimestampTz expires);
extern void lease_shmem_refresh(const LeaseListing *listing,
								TimestampTz *expires);
extern bool lease_shmem_renewing(const LeaseListing *listing);
extern bool lease_shmem_lost(const LeaseListing *listing);
extern void lease_shmem_free_reserved(void);

/* lease_use.c: the leases of fence_use() */
extern void use_leases_at_xact_end(void);
extern void use_leases_forget_all(void);
extern bool use_lease_newer_holder(const char *resource, FenceToken newer);

/* Owner strings: "pg:<sysid>:<pid>:<n>:<16 hex digits>", at most 73 bytes. */
#define FENCED_OWNER_LEN			LEASE_SHMEM_OWNER_LEN

/* Unknown-outcome owners kept per resource; the oldest goes first. */
#define FENCED_MAX_UNKNOWN_OWNERS	8

/*
 * What this session holds, or may hold, of one resource: a lease; or a
 * lease that expired long ago and was pruned, kept only while its token is
 * still declared so that fenced_release can withdraw it ("lapsed"); and
 * the owner strings of attempts whose outcome is unknown (sent, no answer:
 * "unknown owners").  An entry with none of these is removed.
 */
typedef struct Lease
{
	ResourceMapKey key;
	bool		held;			/* token..owner describe a lease */
	bool		xact;			/* held until the transaction ends */
	bool		lapsed;			/* token is a pruned lease's, still declared */
	FenceToken	token;
	TimestampTz acquired;
	TimestampTz expires;		/* by our clock; Redis's decides */
	char		owner[FENCED_OWNER_LEN];
	int			nunknown;		/* owners of unknown-outcome attempts */
	TimestampTz unknown_until;	/* their locks have expired by then */
	char		(*unknown)[FENCED_OWNER_LEN];	/* FENCED_MAX_UNKNOWN_OWNERS
												 * slots, made on first use */
	LeaseListing listing;		/* in the shared table (lease_shmem.c) */
	bool		on_lost_error;	/* acquired with on_lost => 'error' */
	bool		lost_reported;	/* and its loss has failed a statement */
} Lease;

/* An owner the current transaction gives back, or took, on a resource. */
typedef struct XactOwner
{
	char	   *resource;
	char		owner[FENCED_OWNER_LEN];
} XactOwner;

/*
 * The owners of the current transaction's unknown-outcome attempts on one
 * resource, at most FENCED_MAX_UNKNOWN_OWNERS, the oldest going first.
 */
typedef struct XactUnknown
{
	ResourceMapKey key;
	int			nunknown;
	char		unknown[FENCED_MAX_UNKNOWN_OWNERS][FENCED_OWNER_LEN];
} XactUnknown;

/* The session's entries, NULL before the first. */
extern ResourceMap *leases;

/*
 * The current transaction's part, given back when it ends: the resources
 * it took transaction leases on (char *), the owners of its attempts whose
 * outcome is unknown (XactUnknown, by resource; NULL when none), and the
 * session leases it acquired with a raise of the mark (XactOwner *), given
 * back if it aborts.
 */
extern List *xact_resources;
extern ResourceMap *xact_unknown;
extern List *xact_session_acquired;

extern Lease *lease_enter(const char *resource);
extern Lease *lease_lookup(const char *resource);
extern void lease_remove(Lease *lease);
extern void lease_forget_if_empty(Lease *lease);
extern void lease_unknown_add(Lease *lease, const char *owner,
							  TimestampTz until);
extern void lease_unknown_clear(Lease *lease);
extern void lease_remember_unknown(const char *resource, const char *owner,
								   int ttl_ms, bool xact);
extern void lease_end(Lease *lease);
extern void leases_prune(TimestampTz now);
extern void leases_forget_all(void);
extern void leases_unlist_all(void);

extern void xact_remember(const char *resource, const char *owner);
extern void xact_note_resource(const char *resource);
extern void xact_note_session_acquired(const char *resource,
									   const char *owner);
extern void xact_forget(void);

extern void fenced_make_owner(char *owner);
extern void fenced_attempt_start(void);
extern bool fenced_try_acquire(const char *resource, const char *lock_key,
							   const char *token_key, const char *owner,
							   const char *waiter, int ttl_ms, Lease *lease,
							   FenceToken *token, long long *pttl);
extern void fenced_leave_queue(const char *lock_key, const char *waiter);
extern bool fenced_attempt_may_have_run(const ErrorData *edata);

extern bool fenced_acquire_lease(const char *resource,
								 const FencedAcquireOptions *opts,
								 FenceToken *token);

/* One acquisition's waits on a busy lock. */
typedef struct FencedWake
{
	const char *channel;
	bool		refused;		/* the server refused the subscription */
	TimestampTz retry_at;		/* no subscription before then */
	int			failures;		/* subscriptions failed or lost */
} FencedWake;

extern void fenced_wake_start(FencedWake *wake, const char *lock_key);
extern bool fenced_wake_subscribe(FencedWake *wake, TimestampTz deadline);
extern bool fenced_wake_sleep(FencedWake *wake, long long pttl,
							  long remaining);
extern void fenced_wake_end(void);

extern RedisScript release_script;

/* The SQL release (lock.c), which lock_multi.c gives a set back with. */
extern Datum fenced_release(PG_FUNCTION_ARGS);

extern void lease_release_register_exit(void);
extern void lease_release_at_xact_end(bool commit);
extern void lease_release_note_sub(const char *resource, const char *owner);
extern void lease_release_init(void);
extern void lease_takeover_init(void);
extern void lease_release_pre_prepare(void);
extern void lease_release_discard_all(void);

extern void lease_renewer_register(void);

extern void lock_lost_init(void);
extern void lock_lost_watch(void);

#endif							/* FENCING_LOCK_LOCK_INT_H */
