/*-------------------------------------------------------------------------
 *
 * lease_shmem.h
 *	  The shared table of every backend's leases (with the library
 *	  preloaded): what fenced_lock_holders shows and the renewer renews.
 *
 * IDENTIFICATION
 *	  src/lease_shmem.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef LEASE_SHMEM_H
#define LEASE_SHMEM_H

#include "datatype/timestamp.h"
#include "fence_token.h"
#include "resource_name.h"
#include "storage/latch.h"
#include "storage/spin.h"

/* Owner strings (lease_table.h's FENCED_OWNER_LEN). */
#define LEASE_SHMEM_OWNER_LEN		80

/* Key templates are at most this long (fenced_settings.c checks). */
#define LEASE_SHMEM_TEMPLATE_LEN	1025

/*
 * One lease of one backend.  Written by its backend, and by the renewer
 * (expires, renewing, renewed), each under mutex.  generation changes
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
	bool		counter_expires;	/* token key is fencing's own */
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

/* A lease's place in the table, kept in its entry (lease_table.h). */
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
extern void lease_shmem_free_reserved(void);

#endif							/* LEASE_SHMEM_H */
