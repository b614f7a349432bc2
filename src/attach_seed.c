/*-------------------------------------------------------------------------
 *
 * attach_seed.c
 *	  Seeding the marks of a table fence_attach() guards from the rows it
 *	  already holds.
 *
 * The resource of a row is computed by the SQL twin of the guard's rule,
 * from the template read as the guard reads it (resource_template.c).
 *
 * IDENTIFICATION
 *	  src/attach_seed.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "attach.h"
#include "executor/spi.h"
#include "extension.h"
#include "lib/stringinfo.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/snapmgr.h"

/* The table's schema-qualified, quoted name. */
const char *
attach_table_sql(Oid relid)
{
	return quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)),
									  get_rel_name(relid));
}

/*
 * Raise the mark of each resource of the table's rows to the highest
 * token among them; returns the number of resources.
 */
int64
attach_seed(Oid relid, Oid extnsp, const char *token_column,
			const char *resource_sql, const char *notnull_sql)
{
	Oid			advance = extension_advance_func(extnsp);
	StringInfoData sql;
	Portal		portal;
	int64		seeded = 0;

	initStringInfo(&sql);
	appendStringInfo(&sql, "SELECT %s, %s.max(%s) FROM %s WHERE %s IS NOT NULL%s GROUP BY 1",
					 resource_sql, quote_identifier(get_namespace_name(extnsp)),
					 quote_identifier(token_column),
					 attach_table_sql(relid), quote_identifier(token_column),
					 notnull_sql);

	/*
	 * Writers are locked out now, but one that committed while we waited
	 * for the lock is newer than the statement's snapshot (and than a
	 * REPEATABLE READ transaction's): read the rows with the newest one.
	 */
	PushActiveSnapshot(GetLatestSnapshot());
	portal = SPI_cursor_open_with_args(NULL, sql.data, 0, NULL, NULL, NULL,
									   true, 0);
	for (;;)
	{
		uint64		i;

		SPI_cursor_fetch(portal, true, 1000);
		if (SPI_processed == 0)
			break;
		for (i = 0; i < SPI_processed; i++)
		{
			HeapTuple	tuple = SPI_tuptable->vals[i];
			bool		isnull;
			Datum		resource = SPI_getbinval(tuple, SPI_tuptable->tupdesc, 1, &isnull);
			Datum		token = SPI_getbinval(tuple, SPI_tuptable->tupdesc, 2, &isnull);

			(void) OidFunctionCall2(advance, resource, token);
			seeded++;
		}
		SPI_freetuptable(SPI_tuptable);
	}
	SPI_cursor_close(portal);
	PopActiveSnapshot();
	return seeded;
}
