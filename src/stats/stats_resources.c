/*-------------------------------------------------------------------------
 *
 * stats_resources.c
 *	  The resources whose writes the guard rejected, and the function behind
 *	  the view fence_stat_resources.
 *
 * Per database, role and resource (resource scope; a row-scope table has
 * no resource names), the rejections with a stale token (TF001) and
 * without one (TF002), and the times of the first and the last.  In
 * bounded memory: STATS_RESOURCES entries, in shared memory when the
 * library is preloaded, else per backend as the other counters are
 * (stats.c).  When every entry is taken, a new resource takes the place of
 * the one with the fewest rejections, the one rejected longest ago among
 * those: what stays is the resources rejected most, and the latest one.
 * A name longer than STATS_RESOURCE_LEN - 1 bytes is kept cut there.
 *
 * A rejection is counted when the guard raises it, in the row's
 * transaction, before the error aborts it (so counted even if a PL/pgSQL
 * exception block catches it), under a spinlock: rejections are rare
 * next to writes, and the table is small.
 *
 * Resource names carry column values: a role sees the entries of its own
 * rejected writes, and those of every role only with the privileges of
 * pg_read_all_stats, as pg_stat_activity shows others' queries.
 *
 * IDENTIFICATION
 *	  src/stats/stats_resources.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_authid.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "stats/stats.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

/* Resources kept, in all databases, and the longest name kept. */
#define STATS_RESOURCES 128
#define STATS_RESOURCE_LEN 512

typedef struct ResourceEntry
{
	Oid			dbid;			/* InvalidOid: a free entry */
	Oid			userid;
	char		resource[STATS_RESOURCE_LEN];
	int64		stale;			/* TF001 */
	int64		no_token;		/* TF002 */
	TimestampTz first_rejected;
	TimestampTz last_rejected;
} ResourceEntry;

typedef struct SharedResources
{
	slock_t		mutex;
	ResourceEntry entries[STATS_RESOURCES];
} SharedResources;

/* Set in shared mode, by the startup hook in the postmaster. */
static SharedResources *shared = NULL;

static ResourceEntry local_entries[STATS_RESOURCES];

PG_FUNCTION_INFO_V1(fence_stat_resources_data);

/*
 * stats_resources_shmem_size
 *		The shared memory the entries need, asked for by stats.c.
 */
Size
stats_resources_shmem_size(void)
{
	return MAXALIGN(sizeof(SharedResources));
}

/*
 * stats_resources_shmem_startup
 *		Create or attach to the entries; called by stats.c's startup hook,
 *		under AddinShmemInitLock.
 */
void
stats_resources_shmem_startup(void)
{
	bool		found;

	shared = ShmemInitStruct("fencing stats resources",
							 sizeof(SharedResources), &found);
	if (!found)
	{
		memset(shared, 0, sizeof(SharedResources));
		SpinLockInit(&shared->mutex);
	}
}

/* Whether entry a is to be given up before b: fewer rejections, older. */
static bool
resource_weaker(const ResourceEntry *a, const ResourceEntry *b)
{
	int64		na = a->stale + a->no_token;
	int64		nb = b->stale + b->no_token;

	if (na != nb)
		return na < nb;
	return a->last_rejected < b->last_rejected;
}

/*
 * stats_rejected_resource
 *		Count a rejected write to resource (NULL in row scope: nothing
 *		counted), stale or without a token.
 */
void
stats_rejected_resource(const char *resource, bool stale)
{
	ResourceEntry *entries = shared != NULL ? shared->entries : local_entries;
	ResourceEntry *entry = NULL;
	char		name[STATS_RESOURCE_LEN];
	Oid			userid = GetUserId();
	TimestampTz now = GetCurrentTimestamp();
	int			i;

	if (resource == NULL)
		return;
	strlcpy(name, resource, sizeof(name));
	if (shared != NULL)
		SpinLockAcquire(&shared->mutex);
	for (i = 0; i < STATS_RESOURCES; i++)
	{
		ResourceEntry *e = &entries[i];

		if (e->dbid == MyDatabaseId && e->userid == userid &&
			strcmp(e->resource, name) == 0)
		{
			entry = e;
			break;
		}
		if (entry == NULL ||
			(entry->dbid != InvalidOid &&
			 (e->dbid == InvalidOid || resource_weaker(e, entry))))
			entry = e;
	}
	if (entry->dbid != MyDatabaseId || entry->userid != userid ||
		strcmp(entry->resource, name) != 0)
	{
		memset(entry, 0, sizeof(ResourceEntry));
		entry->dbid = MyDatabaseId;
		entry->userid = userid;
		strlcpy(entry->resource, name, sizeof(entry->resource));
		entry->first_rejected = now;
	}
	if (stale)
		entry->stale++;
	else
		entry->no_token++;
	entry->last_rejected = now;
	if (shared != NULL)
		SpinLockRelease(&shared->mutex);
}

/*
 * fence_stat_resources_data()
 *		The entries the caller may see: database, role, resource, the
 *		rejections stale and without a token, the first and last times.
 */
Datum
fence_stat_resources_data(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	bool		all = has_privs_of_role(GetUserId(), ROLE_PG_READ_ALL_STATS);
	ResourceEntry *copy = palloc(sizeof(ResourceEntry) * STATS_RESOURCES);
	int			i;

	InitMaterializedSRF(fcinfo, 0);
	if (shared != NULL)
	{
		SpinLockAcquire(&shared->mutex);
		memcpy(copy, shared->entries, sizeof(ResourceEntry) * STATS_RESOURCES);
		SpinLockRelease(&shared->mutex);
	}
	else
		memcpy(copy, local_entries, sizeof(ResourceEntry) * STATS_RESOURCES);
	for (i = 0; i < STATS_RESOURCES; i++)
	{
		Datum		values[7];
		bool		nulls[7] = {0};

		if (copy[i].dbid == InvalidOid ||
			(!all && !has_privs_of_role(GetUserId(), copy[i].userid)))
			continue;
		values[0] = ObjectIdGetDatum(copy[i].dbid);
		values[1] = ObjectIdGetDatum(copy[i].userid);
		values[2] = CStringGetTextDatum(copy[i].resource);
		values[3] = Int64GetDatum(copy[i].stale);
		values[4] = Int64GetDatum(copy[i].no_token);
		values[5] = TimestampTzGetDatum(copy[i].first_rejected);
		values[6] = TimestampTzGetDatum(copy[i].last_rejected);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	pfree(copy);
	return (Datum) 0;
}

/*
 * stats_resources_reset
 *		Forget every entry: the shared ones, or this backend's.
 */
void
stats_resources_reset(void)
{
	if (shared != NULL)
	{
		SpinLockAcquire(&shared->mutex);
		memset(shared->entries, 0, sizeof(shared->entries));
		SpinLockRelease(&shared->mutex);
	}
	else
		memset(local_entries, 0, sizeof(local_entries));
}
