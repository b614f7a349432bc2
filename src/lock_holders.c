/*-------------------------------------------------------------------------
 *
 * lock_holders.c
 *	  fenced_lock_holders_data(), behind the view fenced_lock_holders: one
 *	  row per lease of every backend (with the library preloaded), else of
 *	  the calling backend.
 *
 * Rows are read from the shared table of leases (lease_shmem.c), each
 * slot copied under its spinlock.  Who sees what is pg_stat_activity's
 * rule: a role with the privileges of pg_read_all_stats (superusers have
 * them) sees every row; any other sees the rows of the backends of roles
 * whose privileges it has, and of the others only that they exist, every
 * column NULL.  Leases that found the table full are not shown.
 *
 * IDENTIFICATION
 *	  src/lock_holders.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_authid.h"
#include "commands/dbcommands.h"
#include "core/core.h"
#include "funcapi.h"
#include "lease_shmem.h"
#include "lease_table.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"

PG_FUNCTION_INFO_V1(fenced_lock_holders_data);

#define HOLDERS_COLS	9

/* The values of one row (every column NULL when not visible). */
static void
holders_put(ReturnSetInfo *rsinfo, const LeaseSlot *l, bool visible)
{
	Datum		values[HOLDERS_COLS];
	bool		nulls[HOLDERS_COLS];
	char	   *role;
	char	   *db;
	int			i;

	for (i = 0; i < HOLDERS_COLS; i++)
		nulls[i] = !visible;
	if (visible)
	{
		role = GetUserNameFromId(l->roleid, true);
		db = get_database_name(l->dbid);
		values[0] = Int32GetDatum(l->pid);
		if (role != NULL)
			values[1] = DirectFunctionCall1(namein, CStringGetDatum(role));
		nulls[1] = role == NULL;
		if (db != NULL)
			values[2] = DirectFunctionCall1(namein, CStringGetDatum(db));
		nulls[2] = db == NULL;
		values[3] = CStringGetTextDatum(l->resource);
		values[4] = FenceTokenGetDatum(l->token);
		values[5] = CStringGetTextDatum(l->xact ? "transaction" : "session");
		values[6] = TimestampTzGetDatum(l->acquired);
		values[7] = TimestampTzGetDatum(l->expires);
		values[8] = BoolGetDatum(l->renewing);
	}
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
}

/* Without the shared table: this backend's leases. */
static void
holders_local(ReturnSetInfo *rsinfo)
{
	ResourceMapIterator iter;
	Lease	   *lease;
	LeaseSlot  *l;

	if (leases == NULL)
		return;
	l = palloc0(sizeof(LeaseSlot));
	l->pid = MyProcPid;
	l->roleid = GetSessionUserId();
	l->dbid = MyDatabaseId;
	resource_map_iterate(leases, &iter);
	while ((lease = resource_map_next(&iter)) != NULL)
	{
		if (!lease->held)
			continue;
		strlcpy(l->resource, lease->key.resource, sizeof(l->resource));
		l->token = lease->token;
		l->xact = lease->xact;
		l->acquired = lease->acquired;
		l->expires = lease->expires;
		holders_put(rsinfo, l, true);
	}
	pfree(l);
}

/*
 * fenced_lock_holders_data()
 *		pid, role, database, resource, token, kind, acquired_at,
 *		expires_at, renewing: see the header.
 */
Datum
fenced_lock_holders_data(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	LeaseSlot  *copy;
	bool		all;
	int			n = lease_shmem_size();
	int			i;

	InitMaterializedSRF(fcinfo, 0);
	if (!lease_shmem_enabled())
	{
		holders_local(rsinfo);
		return (Datum) 0;
	}
	all = has_privs_of_role(GetUserId(), ROLE_PG_READ_ALL_STATS);
	copy = palloc(sizeof(LeaseSlot));
	for (i = 0; i < n; i++)
	{
		LeaseSlot  *slot = lease_shmem_slot(i);

		SpinLockAcquire(&slot->mutex);
		if (slot->in_use)
			memcpy(copy, slot, sizeof(LeaseSlot));
		else
			copy->in_use = false;
		SpinLockRelease(&slot->mutex);
		if (copy->in_use)
			holders_put(rsinfo, copy,
						all || has_privs_of_role(GetUserId(), copy->roleid));
	}
	pfree(copy);
	return (Datum) 0;
}
