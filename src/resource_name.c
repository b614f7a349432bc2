/*-------------------------------------------------------------------------
 *
 * resource_name.c
 *	  The one limit on resource names.
 *
 * Every function that takes a resource name, and the guard for the names
 * its template builds, refuses a name over FENCING_RESOURCE_MAX_BYTES
 * before it writes or sends anything.  fence_mark and fence_forget do not:
 * marks written by 1.0, which had no limit, stay readable and forgettable.
 *
 * IDENTIFICATION
 *	  src/resource_name.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "resource_name.h"

/*
 * resource_name_check
 *		Refuse a name over the limit.
 */
void
resource_name_check(const char *name, size_t len)
{
	if (len > FENCING_RESOURCE_MAX_BYTES)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("resource name is too long"),
				 errdetail("The name is %zu bytes long; the limit is %d bytes.",
						   len, FENCING_RESOURCE_MAX_BYTES),
				 errhint("Name the resource by a shorter key, such as a hash of the long one.")));
}
