/*-------------------------------------------------------------------------
 *
 * ddl_guard.c
 *	  The extension's event trigger: DDL that would silently unfence a
 *	  table is fenced or refused.
 *
 * A row trigger covers only the table it is on.  Some DDL leaves rows of
 * a fenced table, or rows that were fenced, without a guard, and nothing
 * warns.  At ddl_command_end:
 *
 * - CREATE TABLE ... INHERITS, ALTER TABLE ... INHERIT: inheritance
 *	 children never get their parents' triggers, so the child (and its own
 *	 children) gets a copy of the nearest fenced ancestor's fence_guard
 *	 triggers and TRUNCATE guard.
 * - CREATE TRIGGER of a TRUNCATE guard on a partitioned table, CREATE
 *	 TABLE ... PARTITION OF, ALTER TABLE ... ATTACH PARTITION: PostgreSQL
 *	 clones row triggers to partitions but not statement ones, and
 *	 TRUNCATE of a partition fires only the partition's own triggers, so
 *	 every partition gets a clone of its parent's TRUNCATE guard
 *	 (ddl_partitions.c; at ddl_command_start, a table's own TRUNCATE
 *	 guard replaces a clone of the same name).
 * - ALTER TABLE ... INHERIT or ATTACH PARTITION of a populated table: the
 *	 marks of its rows' resources are seeded, as fence_attach() seeds them
 *	 (attach_seed_joined).
 * - ALTER TABLE ... DETACH PARTITION: PostgreSQL drops the triggers it
 *	 cloned, so the detached table gets its former parent's guards back
 *	 as triggers of its own.  Unfencing it is then an explicit DROP
 *	 TRIGGER or fence_detach().
 * - ALTER TYPE ... RENAME VALUE of an enum that a guard's resource
 *	 template names, ALTER COLUMN ... TYPE of a column it names, and CREATE
 *	 OR REPLACE TRIGGER of a guard with another template: the rows would
 *	 move to resources without marks, so they are refused (ddl_renames.c).
 * - a foreign table joining a guarded hierarchy (ATTACH PARTITION,
 *	 INHERIT, CREATE FOREIGN TABLE ... PARTITION OF or INHERITS): its rows
 *	 are written on its own server, outside any guard: refused.
 * - CREATE [OR REPLACE] TRIGGER of a guard with an UPDATE OF list or a
 *	 WHEN condition, which would not fire for every row: refused.
 *
 * At ddl_command_start, DROP EXTENSION fencing CASCADE is refused while
 * fence_token columns or guard triggers exist outside the extension: it
 * would drop every token column and every mark.
 *
 * Copies are made only for those commands, and not when a guard is
 * created on a table that already has inheritance children: pg_restore
 * creates the children's own triggers after the parent's, and a copy made
 * in between would make those fail.  fence_attach() fences the existing
 * children instead.  Clones are not dumped, so partitions get theirs then
 * too.
 *
 * The copies are ordinary triggers made by CREATE TRIGGER as the user
 * running the DDL, who therefore needs the same right to use
 * fence_guard() as whoever fenced the parent; without it, the DDL fails.
 *
 * IDENTIFICATION
 *	  src/adopt/ddl_guard.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "adopt/adopt.h"
#include "catalog/indexing.h"
#include "catalog/namespace.h"
#include "catalog/partition.h"
#include "catalog/pg_class.h"
#include "catalog/pg_inherits.h"
#include "catalog/pg_trigger.h"
#include "commands/event_trigger.h"
#include "commands/trigger.h"
#include "core/core.h"
#include "executor/spi.h"
#include "fencing_errcodes.h"
#include "guard/guard.h"
#include "lib/stringinfo.h"
#include "nodes/makefuncs.h"
#include "parser/parse_func.h"
#include "parser/parse_type.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/typcache.h"

/* The extension's trigger functions, found in its schema. */
typedef struct GuardFuncs
{
	Oid			extnsp;
	Oid			guard;			/* fence_guard() */
	Oid			truncate_guard; /* fence_truncate_guard() */
} GuardFuncs;

PG_FUNCTION_INFO_V1(fence_ddl_guard);

/* Find the trigger functions in the schema of the calling function. */
static void
ddl_guard_funcs(FunctionCallInfo fcinfo, GuardFuncs *funcs)
{
	funcs->extnsp = extension_schema_of_call(fcinfo);
	funcs->guard = extension_func(funcs->extnsp, "fence_guard", 0, NULL);
	funcs->truncate_guard = extension_func(funcs->extnsp,
										   "fence_truncate_guard", 0, NULL);
}

/* The direct parents of relid, by inheritance or partitioning. */
static List *
ddl_parents(Oid relid)
{
	Relation	inhrel = table_open(InheritsRelationId, AccessShareLock);
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tuple;
	List	   *result = NIL;

	ScanKeyInit(&key, Anum_pg_inherits_inhrelid, BTEqualStrategyNumber,
				F_OIDEQ, ObjectIdGetDatum(relid));
	scan = systable_beginscan(inhrel, InheritsRelidSeqnoIndexId, true,
							  NULL, 1, &key);
	while (HeapTupleIsValid(tuple = systable_getnext(scan)))
		result = lappend_oid(result,
							 ((Form_pg_inherits) GETSTRUCT(tuple))->inhparent);
	systable_endscan(scan);
	table_close(inhrel, AccessShareLock);
	return result;
}

/* The triggers calling funcoid of the nearest ancestor of relid that has any. */
static List *
ddl_inherited_triggers(List *ancestors, Oid funcoid)
{
	List	   *queue = list_copy(ancestors);
	int			i;

	/* Breadth first, so that the nearest ancestor wins. */
	for (i = 0; i < list_length(queue); i++)
	{
		Oid			relid = list_nth_oid(queue, i);
		List	   *triggers = ddl_triggers_calling(relid, funcoid);

		if (triggers != NIL)
			return triggers;
		queue = list_concat(queue, ddl_parents(relid));
	}
	return NIL;
}

/* Run one command built by this file, failing loudly. */
static void
ddl_run(const char *sql)
{
	if (SPI_execute(sql, false, 0) < 0)
		elog(ERROR, "SPI_execute failed: %s", sql);
}

/*
 * Create on relid a trigger like source: same name, timing, events, level,
 * function and arguments, and the same enabled state.  An UPDATE OF list
 * or a WHEN condition is not copied, which only makes the copy fire more.
 */
static void
ddl_copy_trigger(Trigger *source, Oid funcoid, Oid relid)
{
	StringInfoData sql;
	const char *table = quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)),
												   get_rel_name(relid));
	const char *sep = "";
	int			i;

	initStringInfo(&sql);
	appendStringInfo(&sql, "CREATE TRIGGER %s ", quote_identifier(source->tgname));
	if (TRIGGER_FOR_BEFORE(source->tgtype))
		appendStringInfoString(&sql, "BEFORE");
	else if (TRIGGER_FOR_INSTEAD(source->tgtype))
		appendStringInfoString(&sql, "INSTEAD OF");
	else
		appendStringInfoString(&sql, "AFTER");
	if (TRIGGER_FOR_INSERT(source->tgtype))
	{
		appendStringInfo(&sql, "%s INSERT", sep);
		sep = " OR";
	}
	if (TRIGGER_FOR_UPDATE(source->tgtype))
	{
		appendStringInfo(&sql, "%s UPDATE", sep);
		sep = " OR";
	}
	if (TRIGGER_FOR_DELETE(source->tgtype))
	{
		appendStringInfo(&sql, "%s DELETE", sep);
		sep = " OR";
	}
	if (TRIGGER_FOR_TRUNCATE(source->tgtype))
		appendStringInfo(&sql, "%s TRUNCATE", sep);
	appendStringInfo(&sql, " ON %s FOR EACH %s EXECUTE FUNCTION %s(",
					 table, TRIGGER_FOR_ROW(source->tgtype) ? "ROW" : "STATEMENT",
					 quote_qualified_identifier(get_namespace_name(get_func_namespace(funcoid)),
												get_func_name(funcoid)));
	for (i = 0; i < source->tgnargs; i++)
		appendStringInfo(&sql, "%s%s", i > 0 ? ", " : "",
						 quote_literal_cstr(source->tgargs[i]));
	appendStringInfoChar(&sql, ')');
	ddl_run(sql.data);

	if (source->tgenabled != TRIGGER_FIRES_ON_ORIGIN)
	{
		resetStringInfo(&sql);
		appendStringInfo(&sql, "ALTER TABLE %s %s TRIGGER %s", table,
						 source->tgenabled == TRIGGER_FIRES_ALWAYS ? "ENABLE ALWAYS" :
						 source->tgenabled == TRIGGER_FIRES_ON_REPLICA ? "ENABLE REPLICA" :
						 "DISABLE",
						 quote_identifier(source->tgname));
		ddl_run(sql.data);
	}
}

/*
 * Give relid the guards of the nearest of ancestors (searched upwards from
 * them) that has any, for each of the two trigger functions it lacks.  A
 * partition already has the row guard, cloned by PostgreSQL.
 */
static void
ddl_fence_from(Oid relid, List *ancestors, GuardFuncs *funcs)
{
	Oid			kinds[2] = {funcs->guard, funcs->truncate_guard};
	int			k;

	for (k = 0; k < 2; k++)
	{
		ListCell   *lc;

		if (ddl_triggers_calling(relid, kinds[k]) != NIL)
			continue;
		/* A partition's TRUNCATE guard is a clone: ddl_partitions.c. */
		if (kinds[k] == funcs->truncate_guard && get_rel_relispartition(relid))
			continue;
		foreach(lc, ddl_inherited_triggers(ancestors, kinds[k]))
			ddl_copy_trigger((Trigger *) lfirst(lc), kinds[k], relid);
	}
}

/* Fence relid and every table below it like their fenced ancestors. */
static void
ddl_fence_tree(Oid relid, GuardFuncs *funcs)
{
	ListCell   *lc;

	foreach(lc, find_all_inheritors(relid, NoLock, NULL))
		ddl_fence_from(lfirst_oid(lc), ddl_parents(lfirst_oid(lc)), funcs);
}

/*
 * Refuse a foreign table at relid or below it, joining a hierarchy guarded
 * at parent: its rows are written on its own server, outside any guard,
 * and have no marks here.  (The guard refuses them when it fires, too.)
 */
static void
ddl_refuse_foreign(Oid relid, Oid parent, GuardFuncs *funcs)
{
	ListCell   *lc;

	if (ddl_triggers_calling(parent, funcs->guard) == NIL &&
		ddl_inherited_triggers(ddl_parents(parent), funcs->guard) == NIL)
		return;
	foreach(lc, find_all_inheritors(relid, NoLock, NULL))
	{
		if (get_rel_relkind(lfirst_oid(lc)) != RELKIND_FOREIGN_TABLE)
			continue;
		ereport(ERROR,
				(errcode(ERRCODE_FENCING_FOREIGN_TABLE),
				 errmsg("foreign table \"%s\" cannot join guarded table \"%s\"",
						get_rel_name(lfirst_oid(lc)), get_rel_name(parent)),
				 errdetail("A foreign table's rows are written on its own server, where no guard of this database checks them, and have no marks here."),
				 errhint("Keep foreign tables out of guarded hierarchies, and guard their rows on the server that holds them.")));
	}
}

/* The relation an event's statement names; it exists at ddl_command_end. */
static Oid
ddl_relid(RangeVar *rv)
{
	return RangeVarGetRelid(rv, NoLock, true);
}

/*
 * CREATE [FOREIGN] TABLE ... INHERITS or PARTITION OF: fence the new
 * table, or refuse a foreign one under a guard.
 */
static void
ddl_create_table(CreateStmt *stmt, GuardFuncs *funcs)
{
	Oid			relid;
	ListCell   *lc;

	if (stmt->inhRelations == NIL)
		return;
	relid = ddl_relid(stmt->relation);
	if (!OidIsValid(relid))
		return;
	foreach(lc, ddl_parents(relid))
		ddl_refuse_foreign(relid, lfirst_oid(lc), funcs);
	ddl_fence_tree(relid, funcs);
	if (get_rel_relispartition(relid))
		(void) ddl_clone_truncate_guards(get_partition_parent(relid, false),
										 funcs->truncate_guard);
}

/*
 * CREATE [OR REPLACE] TRIGGER: a guard with an UPDATE OF list or a WHEN
 * condition is refused (guard_refuse_shape); a TRUNCATE guard on a
 * partitioned table is cloned.
 */
static void
ddl_create_trigger(CreateTrigStmt *stmt, GuardFuncs *funcs)
{
	Oid			relid = ddl_relid(stmt->relation);
	Relation	rel;
	int			i;

	if (!OidIsValid(relid))
		return;
	rel = table_open(relid, AccessShareLock);
	for (i = 0; rel->trigdesc != NULL && i < rel->trigdesc->numtriggers; i++)
	{
		Trigger    *trigger = &rel->trigdesc->triggers[i];

		if (trigger->tgfoid == funcs->guard &&
			strcmp(trigger->tgname, stmt->trigname) == 0)
			guard_refuse_shape(trigger, rel);
	}
	table_close(rel, AccessShareLock);
	(void) ddl_clone_truncate_guards(relid, funcs->truncate_guard);
}

/* ALTER TABLE ... INHERIT, ATTACH PARTITION, DETACH PARTITION. */
static void
ddl_alter_table(AlterTableStmt *stmt, GuardFuncs *funcs)
{
	Oid			relid = ddl_relid(stmt->relation);
	ListCell   *lc;

	if (!OidIsValid(relid))
		return;
	foreach(lc, stmt->cmds)
	{
		AlterTableCmd *cmd = lfirst_node(AlterTableCmd, lc);
		Oid			partid;

		switch (cmd->subtype)
		{
			case AT_AddInherit:
				ddl_refuse_foreign(relid,
								   ddl_relid((RangeVar *) cmd->def), funcs);
				ddl_fence_tree(relid, funcs);
				(void) attach_seed_joined(relid, funcs->guard);
				break;
			case AT_AttachPartition:
				partid = ddl_relid(((PartitionCmd *) cmd->def)->name);
				if (OidIsValid(partid))
				{
					ddl_refuse_foreign(partid, relid, funcs);
					ddl_fence_tree(partid, funcs);
					(void) ddl_clone_truncate_guards(relid, funcs->truncate_guard);
					(void) attach_seed_joined(partid, funcs->guard);
				}
				break;
			case AT_DetachPartition:
			case AT_DetachPartitionFinalize:
				/* Its former parent is no longer among its ancestors. */
				partid = ddl_relid(((PartitionCmd *) cmd->def)->name);
				if (OidIsValid(partid))
				{
					ddl_fence_from(partid, lcons_oid(relid, ddl_parents(relid)),
								   funcs);
					/* Its partitions lost the clones of its own clone. */
					(void) ddl_clone_truncate_guards(partid, funcs->truncate_guard);
				}
				break;
			case AT_AlterColumnType:
				ddl_alter_column_type(relid, cmd->name, funcs->guard);
				break;
			case AT_EnableTrig:
			case AT_EnableAlwaysTrig:
			case AT_EnableReplicaTrig:
			case AT_DisableTrig:
				ddl_clones_follow(relid, cmd->name, funcs->truncate_guard);
				break;
			default:
				break;
		}
	}
}

/*
 * DROP EXTENSION fencing CASCADE: refuse it while tables outside the
 * extension have fence_token columns or guard triggers.  CASCADE would
 * drop those columns and triggers and every mark, leaving the tables
 * unfenced with no trace.  Without CASCADE PostgreSQL itself refuses
 * while such objects exist.
 */
static void
ddl_drop_extension(DropStmt *stmt, GuardFuncs *funcs)
{
	ListCell   *lc;
	bool		ours = false;
	StringInfoData sql;

	if (stmt->removeType != OBJECT_EXTENSION || stmt->behavior != DROP_CASCADE)
		return;
	foreach(lc, stmt->objects)
	{
		if (strcmp(strVal(lfirst(lc)), "fencing") == 0)
			ours = true;
	}
	if (!ours)
		return;

	/*
	 * Run as whoever drops the extension, usually a superuser: every
	 * operator is qualified, so that none found through the search_path
	 * can stand in for pg_catalog's, and the type and functions are passed
	 * by OID.  Columns of domains over fence_token and of arrays of it
	 * count too (CASCADE drops those types); members of extensions, this
	 * one's marks table among them, are left out: they go with their
	 * extension.
	 */
	initStringInfo(&sql);
	appendStringInfo(&sql,
					 "WITH RECURSIVE token_type(oid) AS ("
					 "  SELECT %u::pg_catalog.oid"
					 "  UNION"
					 "  SELECT y.oid FROM pg_catalog.pg_type y, token_type t"
					 "  WHERE y.typbasetype OPERATOR(pg_catalog.=) t.oid"
					 "  OR y.typelem OPERATOR(pg_catalog.=) t.oid)"
					 " SELECT pg_catalog.format('column %%I of table %%s', a.attname, a.attrelid::pg_catalog.regclass)"
					 " FROM pg_catalog.pg_attribute a, token_type t"
					 " WHERE a.atttypid OPERATOR(pg_catalog.=) t.oid"
					 " AND a.attnum OPERATOR(pg_catalog.>) 0 AND NOT a.attisdropped"
					 " AND NOT EXISTS (SELECT FROM pg_catalog.pg_depend d"
					 "  WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass"
					 "  AND d.objid OPERATOR(pg_catalog.=) a.attrelid"
					 "  AND d.deptype OPERATOR(pg_catalog.=) 'e'::pg_catalog.\"char\")"
					 " UNION ALL"
					 " SELECT pg_catalog.format('trigger %%I on table %%s', t.tgname, t.tgrelid::pg_catalog.regclass)"
					 " FROM pg_catalog.pg_trigger t"
					 " WHERE t.tgfoid OPERATOR(pg_catalog.=) %u::pg_catalog.oid"
					 " OR t.tgfoid OPERATOR(pg_catalog.=) %u::pg_catalog.oid"
					 " LIMIT 1",
					 fence_token_type(funcs->extnsp), funcs->guard, funcs->truncate_guard);
	if (SPI_execute(sql.data, true, 1) != SPI_OK_SELECT)
		elog(ERROR, "SPI_execute failed: %s", sql.data);
	if (SPI_processed == 0)
		return;
	ereport(ERROR,
			(errcode(ERRCODE_FENCING_DDL_UNFENCES),
			 errmsg("cannot drop extension fencing with CASCADE while tables use it"),
			 errdetail("CASCADE would drop %s, and every high-water mark, leaving the tables unfenced.",
					   SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1)),
			 errhint("Remove the guards (fence_detach()) and the fence_token columns first, then drop the extension without CASCADE.")));
}

/*
 * fence_ddl_guard
 *		Event trigger function: fences or refuses the DDL described above.
 */
Datum
fence_ddl_guard(PG_FUNCTION_ARGS)
{
	EventTriggerData *trigdata = (EventTriggerData *) fcinfo->context;
	GuardFuncs	funcs;
	Node	   *parsetree;

	if (!CALLED_AS_EVENT_TRIGGER(fcinfo))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("fence_ddl_guard: must be called as event trigger")));
	parsetree = trigdata->parsetree;

	ddl_guard_funcs(fcinfo, &funcs);
	SPI_connect();
	switch (nodeTag(parsetree))
	{
		case T_CreateTrigStmt:
			if (strcmp(trigdata->event, "ddl_command_start") == 0)
			{
				ddl_replace_trigger((CreateTrigStmt *) parsetree, funcs.guard);
				ddl_make_room_for_trigger((CreateTrigStmt *) parsetree,
										  funcs.truncate_guard);
			}
			else
				ddl_create_trigger((CreateTrigStmt *) parsetree, &funcs);
			break;
		case T_CreateStmt:
			ddl_create_table((CreateStmt *) parsetree, &funcs);
			break;
		case T_CreateForeignTableStmt:
			ddl_create_table(&((CreateForeignTableStmt *) parsetree)->base,
							 &funcs);
			break;
		case T_AlterTableStmt:
			ddl_alter_table((AlterTableStmt *) parsetree, &funcs);
			break;
		case T_AlterEnumStmt:
			ddl_alter_enum((AlterEnumStmt *) parsetree, funcs.guard);
			break;
		case T_DropStmt:
			ddl_drop_extension((DropStmt *) parsetree, &funcs);
			break;
		default:
			break;
	}
	SPI_finish();
	PG_RETURN_VOID();
}
