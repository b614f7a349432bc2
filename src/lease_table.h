/*-------------------------------------------------------------------------
 *
 * lease_table.h
 *	  What this session holds, or may hold, in Redis: leases, and the owner
 *	  strings of attempts whose outcome is unknown.
 *
 * IDENTIFICATION
 *	  src/lease_table.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef LEASE_TABLE_H
#define LEASE_TABLE_H

#include "core/core.h"
#include "datatype/timestamp.h"
#include "lease_shmem.h"
#include "nodes/pg_list.h"

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

#endif							/* LEASE_TABLE_H */
