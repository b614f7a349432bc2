/*-------------------------------------------------------------------------
 *
 * ddl_renames.c
 *	  DDL that would rename the resources of guarded rows: refused by the
 *	  event trigger (ddl_guard.c).
 *
 * A resource's name is its guard's template filled with the row's column
 * values as text.  DDL that changes that text for existing rows moves
 * them to resources without marks, where any token is accepted:
 *
 * - ALTER TYPE ... RENAME VALUE of an enum a template's column has;
 * - ALTER TABLE ... ALTER COLUMN ... TYPE of a column a template names
 *	 (numeric 42.5 as integer is 43);
 * - CREATE OR REPLACE TRIGGER of a guard with another template.
 *
 * Each is refused: the way to rename is to detach the guard and attach it
 * again, which seeds the new names' marks from the rows.
 *
 * IDENTIFICATION
 *	  src/adopt/ddl_renames.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "adopt/adopt.h"
#include "catalog/namespace.h"
#include "catalog/pg_trigger.h"
#include "commands/trigger.h"
#include "fencing_errcodes.h"
#include "guard/guard.h"
#include "lib/stringinfo.h"
#include "nodes/makefuncs.h"
#include "parser/parse_func.h"
#include "parser/parse_type.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"

/*
 * ddl_triggers_calling
 *		Copies of the triggers of relid that call funcoid, in the caller's
 * memory context; NIL if it has none.
 */
List *
ddl_triggers_calling(Oid relid, Oid funcoid)
{
	Relation	rel = table_open(relid, AccessShareLock);
	List	   *result = NIL;
	int			i;

	if (rel->trigdesc != NULL)
	{
		for (i = 0; i < rel->trigdesc->numtriggers; i++)
		{
			Trigger    *trigger = &rel->trigdesc->triggers[i];
			Trigger    *copy;
			int			j;

			if (trigger->tgfoid != funcoid)
				continue;
			copy = palloc(sizeof(Trigger));
			*copy = *trigger;
			copy->tgname = pstrdup(trigger->tgname);
			copy->tgargs = palloc(Max(trigger->tgnargs, 1) * sizeof(char *));
			for (j = 0; j < trigger->tgnargs; j++)
				copy->tgargs[j] = pstrdup(trigger->tgargs[j]);
			result = lappend(result, copy);
		}
	}
	table_close(rel, AccessShareLock);
	return result;
}

/*
 * Whether a resource template has a placeholder naming column, read as the
 * guard reads it.  The reading stops at a brace the guard refuses: the
 * guard then refuses every write to the table, which a rename cannot
 * unfence.
 */
static bool
ddl_template_names(const char *template, const char *column)
{
	StringInfoData piece;
	const char *p = template;
	TemplatePiece kind;

	initStringInfo(&piece);
	while ((kind = resource_template_next(&p, &piece)) == TEMPLATE_LITERAL ||
		   kind == TEMPLATE_COLUMN)
	{
		if (kind == TEMPLATE_COLUMN && strcmp(piece.data, column) == 0)
			return true;
	}
	return false;
}

/*
 * ddl_alter_enum
 *		ALTER TYPE ... RENAME VALUE: refuse it while a guard's template names a
 * column of that enum (or of a domain over it).  Renaming the value would
 * rename the resources of every row holding it, whose new names have no
 * marks: any token would then be accepted.
 */
void
ddl_alter_enum(AlterEnumStmt *stmt, Oid guard)
{
	Oid			enumid;
	Relation	tgrel;
	SysScanDesc scan;
	HeapTuple	tuple;
	List	   *guarded = NIL;
	ListCell   *lc;

	if (stmt->oldVal == NULL)
		return;					/* ADD VALUE names no existing row anew */
	enumid = typenameTypeId(NULL, makeTypeNameFromNameList(stmt->typeName));

	tgrel = table_open(TriggerRelationId, AccessShareLock);
	scan = systable_beginscan(tgrel, InvalidOid, false, NULL, 0, NULL);
	while (HeapTupleIsValid(tuple = systable_getnext(scan)))
	{
		Form_pg_trigger tg = (Form_pg_trigger) GETSTRUCT(tuple);

		if (tg->tgfoid == guard && !OidIsValid(tg->tgparentid))
			guarded = list_append_unique_oid(guarded, tg->tgrelid);
	}
	systable_endscan(scan);
	table_close(tgrel, AccessShareLock);

	foreach(lc, guarded)
	{
		Relation	rel = table_open(lfirst_oid(lc), AccessShareLock);
		TupleDesc	tupdesc = RelationGetDescr(rel);
		ListCell   *tc;

		foreach(tc, ddl_triggers_calling(RelationGetRelid(rel), guard))
		{
			Trigger    *trigger = (Trigger *) lfirst(tc);
			int			i;

			if (trigger->tgnargs < 2)
				continue;
			for (i = 0; i < tupdesc->natts; i++)
			{
				Form_pg_attribute att = TupleDescAttr(tupdesc, i);

				if (att->attisdropped || getBaseType(att->atttypid) != enumid ||
					!ddl_template_names(trigger->tgargs[1], NameStr(att->attname)))
					continue;
				ereport(ERROR,
						(errcode(ERRCODE_FENCING_DDL_UNFENCES),
						 errmsg("cannot rename a value of enum %s, which names fenced resources",
								format_type_be(enumid)),
						 errdetail("Column \"%s\" of table \"%s\" is in the resource template \"%s\" of trigger \"%s\"; rows holding the value would move to resources without marks.",
								   NameStr(att->attname), RelationGetRelationName(rel),
								   trigger->tgargs[1], trigger->tgname),
						 errhint("Add a new value instead, and move the rows to it under their lock holders' tokens.")));
			}
		}
		table_close(rel, AccessShareLock);
	}
}

/* A guard trigger's resource template; "" in row scope. */
static const char *
ddl_guard_template(Trigger *trigger)
{
	return trigger->tgnargs >= 2 ? trigger->tgargs[1] : "";
}

/*
 * ddl_replace_trigger
 *		At the start of CREATE OR REPLACE TRIGGER: refuse to replace a guard by
 * one with another resource template.  Every row would be renamed to a
 * resource without a mark, as by ALTER TYPE ... RENAME VALUE.
 */
void
ddl_replace_trigger(CreateTrigStmt *stmt, Oid guard)
{
	Oid			relid;
	const char *template;
	ListCell   *lc;

	if (!stmt->replace || stmt->isconstraint)
		return;
	relid = RangeVarGetRelid(stmt->relation, NoLock, true);
	if (!OidIsValid(relid) ||
		LookupFuncName(stmt->funcname, 0, NULL, true) != guard)
		return;
	template = list_length(stmt->args) >= 2 ?
		strVal(lsecond(stmt->args)) : "";
	foreach(lc, ddl_triggers_calling(relid, guard))
	{
		Trigger    *trigger = (Trigger *) lfirst(lc);

		if (strcmp(trigger->tgname, stmt->trigname) != 0 ||
			strcmp(ddl_guard_template(trigger), template) == 0)
			continue;
		ereport(ERROR,
				(errcode(ERRCODE_FENCING_RESOURCE_RENAME),
				 errmsg("cannot replace guard trigger \"%s\" on table \"%s\" by one with another resource template",
						trigger->tgname, get_rel_name(relid)),
				 errdetail("The template \"%s\" would become \"%s\": every row would move to a resource without a mark, and any token would be accepted for it.",
						   ddl_guard_template(trigger), template),
				 errhint("Drop the trigger and guard the table again with fence_attach(), which seeds the new resources' marks from the rows' tokens.")));
	}
}

/*
 * ddl_alter_column_type
 *		ALTER TABLE ... ALTER COLUMN ... TYPE of a column a guard's resource
 * template names: refuse it.  The text of the rows' values may change
 * (numeric 42.5 as integer is 43), which would move them to resources
 * without marks.  At ddl_command_end, so the rewrite is undone with it.
 */
void
ddl_alter_column_type(Oid relid, const char *column, Oid guard)
{
	ListCell   *lc;

	foreach(lc, ddl_triggers_calling(relid, guard))
	{
		Trigger    *trigger = (Trigger *) lfirst(lc);

		if (!ddl_template_names(ddl_guard_template(trigger), column))
			continue;
		ereport(ERROR,
				(errcode(ERRCODE_FENCING_RESOURCE_RENAME),
				 errmsg("cannot change the type of column \"%s\" of table \"%s\", which names fenced resources",
						column, get_rel_name(relid)),
				 errdetail("Column \"%s\" is in the resource template \"%s\" of trigger \"%s\"; rows whose value reads differently in the new type would move to resources without marks.",
						   column, ddl_guard_template(trigger), trigger->tgname),
				 errhint("Detach the guard (fence_detach()), change the type, and guard the table again with fence_attach(), which seeds the new resources' marks from the rows' tokens.")));
	}
}
