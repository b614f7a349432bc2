/*-------------------------------------------------------------------------
 *
 * ddl_partitions.c
 *	  The TRUNCATE guards of partitions, cloned from their parents'.
 *
 * PostgreSQL clones row triggers to partitions but not statement ones, and
 * TRUNCATE of a partition fires only the partition's own triggers; no
 * event trigger fires for TRUNCATE.  So every partition of a table with a
 * TRUNCATE guard (fence_truncate_guard()) gets one of its own, whatever
 * the order in which the tables and the guard were made: when the guard is
 * created on a partitioned table, when a partition is created or attached
 * (ddl_guard.c), and, for hierarchies made before 1.2 or restored by
 * pg_upgrade, by fence_truncate_guard_partitions().
 *
 * Each is a partition clone of its parent's guard, as PostgreSQL makes for
 * row triggers (CreateTrigger with the parent trigger's OID): it has the
 * parent's name and enabled state (ALTER TABLE ... ENABLE ALWAYS, REPLICA
 * or DISABLE TRIGGER on the parent, which PostgreSQL 15 applies to row
 * triggers' clones only, is applied to it: ddl_clones_follow), cannot be
 * dropped on its own, goes
 * away with the parent's trigger, and is dropped by DETACH PARTITION
 * (the event trigger then gives the detached table a guard of its own).
 * pg_dump does not dump clones, only the parent's trigger (and a clone's
 * enabled state where it differs): the restore's own CREATE TRIGGER on the
 * parent makes them again.  pg_upgrade's dump is restored before the
 * event trigger exists, which is why the function is there.
 *
 * A table's own TRUNCATE guard of the same name, created later (a restore
 * of a dump made before 1.2, whose partitions had ordinary copies, or a
 * table detached and attached again), replaces the clone instead of
 * failing on the name (ddl_make_room_for_trigger).
 *
 * IDENTIFICATION
 *	  src/adopt/ddl_partitions.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "adopt/adopt.h"
#include "catalog/dependency.h"
#include "catalog/indexing.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_inherits.h"
#include "catalog/pg_trigger.h"
#include "commands/trigger.h"
#include "core/core.h"
#include "executor/spi.h"
#include "nodes/makefuncs.h"
#include "parser/parse_func.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"

/* A TRUNCATE guard of a table, as its clones need it. */
typedef struct TruncateGuard
{
	Oid			oid;
	char	   *name;
	char		enabled;
	Oid			parent;			/* its parent's trigger, if a clone */
} TruncateGuard;

PG_FUNCTION_INFO_V1(fence_truncate_guard_partitions);

/* The triggers of relid that call funcoid, as a list of TruncateGuard. */
static List *
part_guards(Oid relid, Oid funcoid)
{
	Relation	tgrel = table_open(TriggerRelationId, AccessShareLock);
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tuple;
	List	   *result = NIL;

	ScanKeyInit(&key, Anum_pg_trigger_tgrelid, BTEqualStrategyNumber,
				F_OIDEQ, ObjectIdGetDatum(relid));
	scan = systable_beginscan(tgrel, TriggerRelidNameIndexId, true,
							  NULL, 1, &key);
	while (HeapTupleIsValid(tuple = systable_getnext(scan)))
	{
		Form_pg_trigger tg = (Form_pg_trigger) GETSTRUCT(tuple);
		TruncateGuard *guard;

		if (tg->tgfoid != funcoid)
			continue;
		guard = palloc(sizeof(TruncateGuard));
		guard->oid = tg->oid;
		guard->name = pstrdup(NameStr(tg->tgname));
		guard->enabled = tg->tgenabled;
		guard->parent = tg->tgparentid;
		result = lappend(result, guard);
	}
	systable_endscan(scan);
	table_close(tgrel, AccessShareLock);
	return result;
}

/* Give partition partid a clone of parent, a TRUNCATE guard calling funcoid. */
static void
part_clone(Oid partid, TruncateGuard *parent, Oid funcoid)
{
	CreateTrigStmt *stmt = makeNode(CreateTrigStmt);

	stmt->trigname = parent->name;
	stmt->relation = makeRangeVar(get_namespace_name(get_rel_namespace(partid)),
								  get_rel_name(partid), -1);
	stmt->funcname = list_make2(makeString(get_namespace_name(get_func_namespace(funcoid))),
								makeString(get_func_name(funcoid)));
	stmt->row = false;
	stmt->timing = TRIGGER_TYPE_BEFORE;
	stmt->events = TRIGGER_TYPE_TRUNCATE;
	(void) CreateTriggerFiringOn(stmt, NULL, partid, InvalidOid, InvalidOid,
								 InvalidOid, funcoid, parent->oid, NULL,
								 false, true, parent->enabled);
	CommandCounterIncrement();
}

/*
 * ddl_clone_truncate_guards
 *		Give every partition below relid that has no TRUNCATE guard clones
 *		of its parent's; returns how many were made.  Nothing if relid is
 *		not partitioned or has no guard.
 */
int
ddl_clone_truncate_guards(Oid relid, Oid truncate_guard)
{
	List	   *guards;
	ListCell   *lc;
	int			made = 0;

	if (get_rel_relkind(relid) != RELKIND_PARTITIONED_TABLE)
		return 0;
	guards = part_guards(relid, truncate_guard);
	if (guards == NIL)
		return 0;
	foreach(lc, find_inheritance_children(relid, NoLock))
	{
		Oid			partid = lfirst_oid(lc);

		if (part_guards(partid, truncate_guard) == NIL)
		{
			ListCell   *gc;

			foreach(gc, guards)
			{
				part_clone(partid, (TruncateGuard *) lfirst(gc), truncate_guard);
				made++;
			}
		}
		made += ddl_clone_truncate_guards(partid, truncate_guard);
	}
	return made;
}

/*
 * ddl_clones_follow
 *		After ALTER TABLE relid ENABLE [ALWAYS | REPLICA] or DISABLE TRIGGER
 *		tgname: if it is a TRUNCATE guard, give its clones on the partitions
 *		its new state.  Each ALTER TABLE run here reaches the event trigger
 *		in turn, which carries the state on down.  Called inside the event
 *		trigger's SPI connection.
 */
void
ddl_clones_follow(Oid relid, const char *tgname, Oid truncate_guard)
{
	ListCell   *lc;
	TruncateGuard *parent = NULL;

	if (get_rel_relkind(relid) != RELKIND_PARTITIONED_TABLE)
		return;
	foreach(lc, part_guards(relid, truncate_guard))
	{
		TruncateGuard *guard = (TruncateGuard *) lfirst(lc);

		if (strcmp(guard->name, tgname) == 0)
			parent = guard;
	}
	if (parent == NULL)
		return;
	foreach(lc, find_inheritance_children(relid, NoLock))
	{
		Oid			partid = lfirst_oid(lc);
		ListCell   *gc;

		foreach(gc, part_guards(partid, truncate_guard))
		{
			TruncateGuard *clone = (TruncateGuard *) lfirst(gc);
			const char *sql;

			if (clone->parent != parent->oid || clone->enabled == parent->enabled)
				continue;
			sql = psprintf("ALTER TABLE %s %s TRIGGER %s",
						   quote_qualified_identifier(get_namespace_name(get_rel_namespace(partid)),
													  get_rel_name(partid)),
						   parent->enabled == TRIGGER_FIRES_ALWAYS ? "ENABLE ALWAYS" :
						   parent->enabled == TRIGGER_FIRES_ON_REPLICA ? "ENABLE REPLICA" :
						   parent->enabled == TRIGGER_DISABLED ? "DISABLE" : "ENABLE",
						   quote_identifier(clone->name));
			if (SPI_execute(sql, false, 0) < 0)
				elog(ERROR, "SPI_execute failed: %s", sql);
		}
	}
}

/*
 * ddl_make_room_for_trigger
 *		At the start of CREATE TRIGGER of a TRUNCATE guard: drop a clone of
 *		the same name on the table, which the new trigger replaces.
 */
void
ddl_make_room_for_trigger(CreateTrigStmt *stmt, Oid truncate_guard)
{
	Oid			relid = RangeVarGetRelid(stmt->relation, NoLock, true);
	ListCell   *lc;

	if (!OidIsValid(relid) || stmt->row || stmt->isconstraint ||
		LookupFuncName(stmt->funcname, 0, NULL, true) != truncate_guard)
		return;
	foreach(lc, part_guards(relid, truncate_guard))
	{
		TruncateGuard *guard = (TruncateGuard *) lfirst(lc);
		ObjectAddress clone;

		if (!OidIsValid(guard->parent) || strcmp(guard->name, stmt->trigname) != 0)
			continue;

		/*
		 * As DETACH PARTITION does: a clone's dependency on its parent's
		 * trigger forbids dropping it alone, so it goes first.
		 */
		deleteDependencyRecordsForClass(TriggerRelationId, guard->oid,
										TriggerRelationId,
										DEPENDENCY_PARTITION_PRI);
		deleteDependencyRecordsForClass(TriggerRelationId, guard->oid,
										RelationRelationId,
										DEPENDENCY_PARTITION_SEC);
		CommandCounterIncrement();
		ObjectAddressSet(clone, TriggerRelationId, guard->oid);
		performDeletion(&clone, DROP_RESTRICT, PERFORM_DELETION_INTERNAL);
		CommandCounterIncrement();
	}
}

/*
 * fence_truncate_guard_partitions() returns integer
 *		Give every partition of a table with a TRUNCATE guard that lacks
 *		one a clone of its parent's; returns how many were made.  Run by the
 *		1.2 upgrade, and after pg_upgrade.
 */
Datum
fence_truncate_guard_partitions(PG_FUNCTION_ARGS)
{
	Oid			truncate_guard = extension_func(extension_schema_of_call(fcinfo),
												"fence_truncate_guard", 0, NULL);
	Relation	tgrel = table_open(TriggerRelationId, AccessShareLock);
	SysScanDesc scan;
	HeapTuple	tuple;
	List	   *parents = NIL;
	ListCell   *lc;
	int32		made = 0;

	scan = systable_beginscan(tgrel, InvalidOid, false, NULL, 0, NULL);
	while (HeapTupleIsValid(tuple = systable_getnext(scan)))
	{
		Form_pg_trigger tg = (Form_pg_trigger) GETSTRUCT(tuple);

		if (tg->tgfoid == truncate_guard &&
			get_rel_relkind(tg->tgrelid) == RELKIND_PARTITIONED_TABLE)
			parents = list_append_unique_oid(parents, tg->tgrelid);
	}
	systable_endscan(scan);
	table_close(tgrel, AccessShareLock);

	foreach(lc, parents)
		made += ddl_clone_truncate_guards(lfirst_oid(lc), truncate_guard);
	PG_RETURN_INT32(made);
}
