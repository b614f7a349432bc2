/*-------------------------------------------------------------------------
 *
 * attach.c
 *	  fence_attach() and fence_detach(): guard an existing table, seeding
 *	  the marks from the rows it already holds, and take the guard away.
 *
 * A table that already holds rows with tokens has no marks yet: until
 * each resource is written once, any token, however stale, is accepted.
 * fence_attach() therefore raises the mark of every resource to the
 * highest token its rows carry, holding a SHARE ROW EXCLUSIVE lock on the
 * table (and its children) from before the triggers exist until the
 * transaction ends, so that no write slips between the scan and the
 * guard.  Marks are raised through fence_advance(), never lowered.
 *
 * The resource of a row is computed by the same rules as the guard's
 * (fence_guard.c), from the template read as the guard reads it
 * (guard_config.c): a placeholder takes its column's text output, numeric
 * values without trailing zeros and character(n) without trailing blanks.
 *
 * The triggers are created with CREATE TRIGGER as the calling user, the
 * table's owner, who therefore needs EXECUTE on fence_guard() as for
 * creating the trigger by hand: fence_attach() grants no power of its own.
 * Their names sort after every ASCII name, since BEFORE triggers fire in
 * name order and the guard must see the row as it will be stored.
 *
 * IDENTIFICATION
 *	  src/attach.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/table.h"
#include "catalog/pg_inherits.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "fence_token.h"
#include "fencing_errcodes.h"
#include "funcapi.h"
#include "guard_config.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "parser/parse_func.h"
#include "pg_compat.h"
#include "storage/lmgr.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

/* Names of the triggers fence_attach() creates; "~" sorts after ASCII. */
#define ATTACH_GUARD_NAME		"~fence"
#define ATTACH_TRUNCATE_NAME	"~fence_truncate"

PG_FUNCTION_INFO_V1(fence_attach);
PG_FUNCTION_INFO_V1(fence_detach);

/* The OID of function name in the extension's schema. */
static Oid
attach_func(Oid extnsp, const char *name, int nargs, Oid *argtypes)
{
	return LookupFuncName(list_make2(makeString(get_namespace_name(extnsp)),
									 makeString(pstrdup(name))),
						  nargs, argtypes, false);
}

/* Refuse unless the current user owns relid. */
static void
attach_check_owner(Oid relid)
{
	if (!fencing_relation_ownercheck(relid, GetUserId()))
		aclcheck_error(ACLCHECK_NOT_OWNER,
					   get_relkind_objtype(get_rel_relkind(relid)),
					   get_rel_name(relid));
}

/*
 * A column named by fence_attach's arguments: it must exist and must not
 * be generated (a BEFORE trigger sees a generated column before it is
 * computed).  what says which argument named it.
 */
static Form_pg_attribute
attach_column(Relation rel, const char *name, const char *what)
{
	TupleDesc	tupdesc = RelationGetDescr(rel);
	int			i;

	for (i = 0; i < tupdesc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(tupdesc, i);

		if (att->attisdropped || strcmp(NameStr(att->attname), name) != 0)
			continue;
		if (att->attgenerated != '\0')
			ereport(ERROR,
					(errcode(ERRCODE_FENCING_GUARD_MISCONFIGURED),
					 errmsg("%s \"%s\" of table \"%s\" is a generated column",
							what, name, RelationGetRelationName(rel)),
					 errdetail("A BEFORE trigger sees a generated column before it is computed.")));
		return att;
	}
	ereport(ERROR,
			(errcode(ERRCODE_UNDEFINED_COLUMN),
			 errmsg("%s \"%s\" does not exist in table \"%s\"",
					what, name, RelationGetRelationName(rel))));
	return NULL;				/* keep compiler quiet */
}

/*
 * The SQL expression naming a row's resource by template, and in *notnull
 * the condition that every placeholder column is set; both over the
 * columns of rel.
 */
static char *
attach_resource_sql(Relation rel, const char *template, StringInfo notnull)
{
	StringInfoData expr;
	StringInfoData piece;
	const char *p = template;
	TemplatePiece kind;

	initStringInfo(&expr);
	initStringInfo(&piece);
	appendStringInfoString(&expr, "''");
	while ((kind = guard_template_next(&p, &piece)) != TEMPLATE_END)
	{
		if (kind == TEMPLATE_LITERAL)
			appendStringInfo(&expr, " OPERATOR(pg_catalog.||) %s",
							 quote_literal_cstr(piece.data));
		else if (kind == TEMPLATE_COLUMN)
		{
			const char *name = piece.data;
			const char *col;
			Oid			basetype;

			basetype = getBaseType(attach_column(rel, name, "resource column")->atttypid);
			col = quote_identifier(name);
			if (basetype == NUMERICOID)
				appendStringInfo(&expr, " OPERATOR(pg_catalog.||) pg_catalog.format('%%s', pg_catalog.trim_scale(%s))", col);
			else if (basetype == BPCHAROID)
				appendStringInfo(&expr, " OPERATOR(pg_catalog.||) pg_catalog.rtrim(pg_catalog.format('%%s', %s), ' ')", col);
			else
				appendStringInfo(&expr, " OPERATOR(pg_catalog.||) pg_catalog.format('%%s', %s)", col);
			appendStringInfo(notnull, " AND %s IS NOT NULL", col);
		}
		else
			guard_template_refuse(template, NULL, kind);
	}
	return expr.data;
}

/* Run one command built by this file, failing loudly. */
static void
attach_run(const char *sql)
{
	if (SPI_execute(sql, false, 0) < 0)
		elog(ERROR, "SPI_execute failed: %s", sql);
}

/* The table's schema-qualified, quoted name. */
static const char *
attach_table_sql(Oid relid)
{
	return quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)),
									  get_rel_name(relid));
}

/*
 * Raise the mark of each resource of the table's rows to the highest
 * token among them; returns the number of resources.
 */
static int64
attach_seed(Oid relid, Oid extnsp, const char *token_column,
			const char *resource_sql, const char *notnull_sql)
{
	Oid			argtypes[2] = {TEXTOID, InvalidOid};
	Oid			advance;
	StringInfoData sql;
	Portal		portal;
	int64		seeded = 0;

	argtypes[1] = fence_token_type(extnsp);
	advance = attach_func(extnsp, "fence_advance", 2, argtypes);

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

/*
 * attach_lock_tables
 *		Keep writers out of relid and every table below it until the end of
 *		the transaction, checking that the caller owns each; their list,
 *		relid first.
 *
 * find_all_inheritors locks the children only: relid itself is locked
 * first, after the ownership check, so that a stranger cannot queue a
 * lock that holds up the table's writers.
 */
static List *
attach_lock_tables(Oid relid)
{
	List	   *tables;
	ListCell   *lc;

	attach_check_owner(relid);
	LockRelationOid(relid, ShareRowExclusiveLock);
	tables = find_all_inheritors(relid, ShareRowExclusiveLock, NULL);
	foreach(lc, tables)
		attach_check_owner(lfirst_oid(lc));
	return tables;
}

/* Whether relid has a trigger calling funcoid, its own or cloned. */
static bool
attach_has_trigger(Oid relid, Oid funcoid)
{
	Relation	rel = table_open(relid, AccessShareLock);
	bool		found = false;
	int			i;

	for (i = 0; rel->trigdesc != NULL && i < rel->trigdesc->numtriggers; i++)
	{
		Trigger    *trigger = &rel->trigdesc->triggers[i];

		if (trigger->tgfoid == funcoid)
			found = true;
	}
	table_close(rel, AccessShareLock);
	return found;
}

/*
 * fence_attach(tbl regclass, token_column name, template text DEFAULT NULL,
 *				VARIADIC options text[] DEFAULT '{}') returns bigint
 *		Guard a table and its children, seeding the marks from the rows
 *		present; returns the number of resources seeded.
 */
Datum
fence_attach(PG_FUNCTION_ARGS)
{
	Oid			relid = PG_GETARG_OID(0);
	const char *token_column;
	const char *template;
	Oid			extnsp = get_func_namespace(fcinfo->flinfo->fn_oid);
	Oid			guard = attach_func(extnsp, "fence_guard", 0, NULL);
	Oid			truncate_guard = attach_func(extnsp, "fence_truncate_guard", 0, NULL);
	StringInfoData args;
	StringInfoData notnull;
	char	   *resource_sql = NULL;
	Relation	rel;
	Form_pg_attribute att;
	List	   *tables;
	ListCell   *lc;
	int64		seeded = 0;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1) || PG_ARGISNULL(3))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("table, token column and options must not be null")));
	token_column = NameStr(*PG_GETARG_NAME(1));
	template = PG_ARGISNULL(2) ? "" : text_to_cstring(PG_GETARG_TEXT_PP(2));
	/* Writers wait from here to the end of the transaction. */
	tables = attach_lock_tables(relid);

	rel = table_open(relid, NoLock);
	att = attach_column(rel, token_column, "token column");
	if (att->atttypid != fence_token_type(extnsp))
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("token column \"%s\" of table \"%s\" is not of type fence_token",
						token_column, RelationGetRelationName(rel))));
	if (att->atthasdef)
		ereport(ERROR,
				(errcode(ERRCODE_FENCING_GUARD_MISCONFIGURED),
				 errmsg("token column \"%s\" of table \"%s\" has a default",
						token_column, RelationGetRelationName(rel)),
				 errdetail("A trigger cannot tell a default from a token the statement wrote, so the default would override declared tokens."),
				 errhint("Drop the default: ALTER TABLE %s ALTER COLUMN %s DROP DEFAULT.",
						 attach_table_sql(relid), quote_identifier(token_column))));
	initStringInfo(&notnull);
	if (template[0] != '\0')
		resource_sql = attach_resource_sql(rel, template, &notnull);
	table_close(rel, NoLock);

	foreach(lc, tables)
	{
		if (attach_has_trigger(lfirst_oid(lc), guard))
			ereport(ERROR,
					(errcode(ERRCODE_FENCING_GUARD_MISCONFIGURED),
					 errmsg("table \"%s\" is already guarded", get_rel_name(lfirst_oid(lc))),
					 errhint("Detach the guard first with fence_detach().")));
	}

	/* The trigger's arguments: the token column, the template, options. */
	initStringInfo(&args);
	appendStringInfoString(&args, quote_literal_cstr(token_column));
	{
		ArrayType  *options = PG_GETARG_ARRAYTYPE_P(3);
		Datum	   *elems;
		bool	   *nulls;
		int			nelems;
		int			i;

		deconstruct_array(options, TEXTOID, -1, false, TYPALIGN_INT,
						  &elems, &nulls, &nelems);
		if (template[0] != '\0' || nelems > 0)
			appendStringInfo(&args, ", %s", quote_literal_cstr(template));
		for (i = 0; i < nelems; i++)
		{
			if (nulls[i])
				ereport(ERROR,
						(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
						 errmsg("table, token column and options must not be null")));
			appendStringInfo(&args, ", %s",
							 quote_literal_cstr(TextDatumGetCString(elems[i])));
		}
	}

	SPI_connect();
	foreach(lc, tables)
	{
		Oid			child = lfirst_oid(lc);

		/* Partitions get the row trigger cloned from the parent's. */
		if (child == relid || !get_rel_relispartition(child))
			attach_run(psprintf("CREATE TRIGGER %s BEFORE INSERT OR UPDATE%s ON %s FOR EACH ROW EXECUTE FUNCTION %s.fence_guard(%s)",
								quote_identifier(ATTACH_GUARD_NAME),
								template[0] != '\0' ? " OR DELETE" : "",
								attach_table_sql(child),
								quote_identifier(get_namespace_name(extnsp)),
								args.data));
		if (!attach_has_trigger(child, truncate_guard))
			attach_run(psprintf("CREATE TRIGGER %s BEFORE TRUNCATE ON %s FOR EACH STATEMENT EXECUTE FUNCTION %s.fence_truncate_guard()",
								quote_identifier(ATTACH_TRUNCATE_NAME),
								attach_table_sql(child),
								quote_identifier(get_namespace_name(extnsp))));
	}
	if (resource_sql != NULL)
		seeded = attach_seed(relid, extnsp, token_column, resource_sql,
							 notnull.data);
	SPI_finish();
	PG_RETURN_INT64(seeded);
}

/*
 * fence_detach(tbl regclass) returns integer
 *		Drop the guards of a table and its children (their fence_guard and
 *		fence_truncate_guard triggers, whatever their names); the marks
 *		stay.  Returns the number of triggers dropped.
 */
Datum
fence_detach(PG_FUNCTION_ARGS)
{
	Oid			relid = PG_GETARG_OID(0);
	Oid			extnsp = get_func_namespace(fcinfo->flinfo->fn_oid);
	Oid			funcs[2];
	List	   *tables;
	ListCell   *lc;
	int32		dropped = 0;

	funcs[0] = attach_func(extnsp, "fence_guard", 0, NULL);
	funcs[1] = attach_func(extnsp, "fence_truncate_guard", 0, NULL);
	tables = attach_lock_tables(relid);

	SPI_connect();
	foreach(lc, tables)
	{
		Oid			child = lfirst_oid(lc);
		Relation	rel = table_open(child, NoLock);
		List	   *names = NIL;
		ListCell   *nc;
		int			i;

		attach_check_owner(child);
		for (i = 0; rel->trigdesc != NULL && i < rel->trigdesc->numtriggers; i++)
		{
			Trigger    *trigger = &rel->trigdesc->triggers[i];

			/* A clone goes with its parent's trigger. */
			if ((trigger->tgfoid == funcs[0] || trigger->tgfoid == funcs[1]) &&
				!trigger->tgisclone)
				names = lappend(names, pstrdup(trigger->tgname));
		}
		table_close(rel, NoLock);
		foreach(nc, names)
		{
			attach_run(psprintf("DROP TRIGGER %s ON %s",
								quote_identifier(lfirst(nc)),
								attach_table_sql(child)));
			dropped++;
		}
	}
	SPI_finish();
	PG_RETURN_INT32(dropped);
}
