/*-------------------------------------------------------------------------
 *
 * lock_multi.c
 *	  fenced_acquire_xact(resources text[], ...): the locks of several
 *	  resources for the current transaction, all or none.
 *
 *	  SELECT fenced_acquire_xact(ARRAY['account:1', 'account:2']);
 *
 * The resources are taken one by one, in the byte order of their names
 * (strcmp, never a collation's), each by fenced_acquire_lease() as the
 * single form takes one, its mark raised as that one raises it.  Two
 * transactions that want overlapping sets thus take their common
 * resources in the same order: neither can hold one the other waits for
 * while it waits for one the other holds, in Redis or on the marks table,
 * whose rows they lock in that order too.  A name given twice is taken
 * once.
 *
 * All or none: the wait is one deadline for the whole set; when a
 * resource is still busy at it, the locks taken so far are given back at
 * once (fenced_release) and the result is NULL, as the single form
 * returns NULL when busy.  A resource this session already holds is
 * refused before anything is sent: giving back the set would end a lease
 * the caller had before.  An error part way leaves the locks taken with
 * the transaction, which gives them back when it ends.
 *
 * IDENTIFICATION
 *	  src/lock/lock_multi.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "core/core.h"
#include "fencing_errcodes.h"
#include "lock/lock_int.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/timestamp.h"

PG_FUNCTION_INFO_V1(fenced_acquire_xact_multi);

/* One resource of the set, in byte order, with its token once taken. */
typedef struct MultiResource
{
	char	   *name;
	FenceToken	token;
} MultiResource;

static int
multi_resource_cmp(const void *a, const void *b)
{
	return strcmp(((const MultiResource *) a)->name,
				  ((const MultiResource *) b)->name);
}

/*
 * multi_resources_arg
 *		The resources argument: every name checked as the single form
 *		checks its one, sorted in byte order, each name once.  *names gets
 *		the names in the caller's order, *ninput their number.
 */
static MultiResource *
multi_resources_arg(FunctionCallInfo fcinfo, char ***names, int *ninput,
					int *nset)
{
	ArrayType  *arr;
	Datum	   *elems;
	bool	   *nulls;
	int			n;
	int			i;
	int			kept;
	MultiResource *set;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("resources must not be null")));
	arr = PG_GETARG_ARRAYTYPE_P(0);
	deconstruct_array(arr, TEXTOID, -1, false, TYPALIGN_INT,
					  &elems, &nulls, &n);
	if (n == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("resources must not be empty")));
	*names = palloc(sizeof(char *) * n);
	set = palloc(sizeof(MultiResource) * n);
	for (i = 0; i < n; i++)
	{
		char	   *name;

		if (nulls[i])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("resources must not contain null")));
		name = TextDatumGetCString(elems[i]);
		if (name[0] == '\0')
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("resources must not contain an empty name")));
		resource_name_check(name, strlen(name));
		(*names)[i] = name;
		set[i].name = name;
		set[i].token = 0;
	}
	qsort(set, n, sizeof(MultiResource), multi_resource_cmp);
	kept = 1;
	for (i = 1; i < n; i++)
		if (strcmp(set[i].name, set[kept - 1].name) != 0)
			set[kept++] = set[i];
	*ninput = n;
	*nset = kept;
	return set;
}

/*
 * multi_refuse_held
 *		Refuse a set with a resource this session holds already, for the
 *		session or a transaction.
 */
static void
multi_refuse_held(const MultiResource *set, int nset)
{
	int			i;

	for (i = 0; i < nset; i++)
	{
		Lease	   *lease = lease_lookup(set[i].name);

		if (lease != NULL && lease->held)
			ereport(ERROR,
					(errcode(ERRCODE_FENCING_LOCK_ALREADY_HELD),
					 errmsg("resource \"%s\" is already locked by this session",
							set[i].name),
					 errdetail("Locks of several resources are taken all or none; a lock held before cannot be part of the set."),
					 errhint("Release it with fenced_release() first, or leave it out of the set.")));
	}
}

/* Give back the first n locks of the set, the last taken first. */
static void
multi_give_back(const MultiResource *set, int n)
{
	while (n-- > 0)
		(void) DirectFunctionCall1(fenced_release,
								   CStringGetTextDatum(set[n].name));
}

/*
 * fenced_acquire_xact(resources text[], ttl interval, wait interval,
 *					   renew boolean, max_hold interval)
 *	returns fence_token[]
 *
 * Take the locks of resources for the current transaction, in the byte
 * order of their names, each with a new token declared for the
 * transaction; their tokens in the order of resources.  NULL, with none
 * of them held, if one is still busy when wait has passed.
 */
Datum
fenced_acquire_xact_multi(PG_FUNCTION_ARGS)
{
	char	  **names;
	int			ninput;
	int			nset;
	MultiResource *set = multi_resources_arg(fcinfo, &names, &ninput, &nset);
	FencedAcquireOptions opts;
	TimestampTz deadline;
	Datum	   *tokens;
	Oid			elemtype;
	int16		elemlen;
	bool		elembyval;
	char		elemalign;
	int			i;

	fenced_options_args(fcinfo, true, &opts);
	multi_refuse_held(set, nset);
	deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), opts.wait_ms);
	for (i = 0; i < nset; i++)
	{
		long		remaining;

		remaining = TimestampDifferenceMilliseconds(GetCurrentTimestamp(),
													deadline);
		opts.wait_ms = (int) remaining;
		if (!fenced_acquire_lease(set[i].name, &opts, &set[i].token))
		{
			multi_give_back(set, i);
			PG_RETURN_NULL();
		}
	}

	elemtype = get_element_type(get_fn_expr_rettype(fcinfo->flinfo));
	if (!OidIsValid(elemtype))
		elog(ERROR, "fenced_acquire_xact(text[]) must return an array");
	get_typlenbyvalalign(elemtype, &elemlen, &elembyval, &elemalign);
	tokens = palloc(sizeof(Datum) * ninput);
	for (i = 0; i < ninput; i++)
	{
		MultiResource key;
		MultiResource *found;

		key.name = names[i];
		found = bsearch(&key, set, nset, sizeof(MultiResource),
						multi_resource_cmp);
		Assert(found != NULL);
		tokens[i] = FenceTokenGetDatum(found->token);
	}
	PG_RETURN_ARRAYTYPE_P(construct_array(tokens, ninput, elemtype, elemlen,
										  elembyval, elemalign));
}
