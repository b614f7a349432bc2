/*-------------------------------------------------------------------------
 *
 * guard_config.c
 *	  The parsed arguments of a fence_guard() trigger, cached per trigger.
 *
 * Argument 1 names the token column, argument 2 is the resource template
 * (absent or empty for row scope), and further arguments are options.
 * They are parsed and checked against the table once per trigger; a
 * relcache invalidation of the table, or of any of its ancestors, marks
 * its configurations stale, and the next lookup parses them again.
 *
 * IDENTIFICATION
 *	  src/guard/guard_config.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "catalog/indexing.h"
#include "catalog/pg_class.h"
#include "catalog/pg_attribute.h"
#include "catalog/pg_inherits.h"
#include "catalog/pg_trigger.h"
#include "catalog/pg_type.h"
#include "core/core.h"
#include "executor/spi.h"
#include "fencing_errcodes.h"
#include "guard/guard.h"
#include "lib/stringinfo.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/syscache.h"

static HTAB *guard_configs = NULL;
static GuardConfig *last_config = NULL; /* an entry of guard_configs */

/*
 * Configurations made stale by DDL, and the memory of those replaced.
 * Invalidations arrive whenever a lock is taken, which can be in the
 * middle of a trigger call still using the configuration, so stale ones
 * are only marked here and replaced at the next lookup; the memory of a
 * replaced one is kept until the end of the transaction.
 */
static MemoryContext retired_configs_cxt = NULL;

/* Mark stale the configurations of triggers on relid (on all, if invalid). */
static void
guard_relcache_callback(Datum arg, Oid relid)
{
	HASH_SEQ_STATUS status;
	GuardConfig *config;

	if (guard_configs == NULL)
		return;
	hash_seq_init(&status, guard_configs);
	while ((config = hash_seq_search(&status)) != NULL)
	{
		int			i;

		if (relid == InvalidOid || config->relid == relid)
			config->valid = false;
		for (i = 0; i < config->nancestors; i++)
		{
			if (config->ancestors[i] == relid)
				config->valid = false;
		}
	}
}

/*
 * guard_config_at_xact_end
 *		Free replaced configurations, and stale ones with their entries;
 *		called when a transaction ends, whichever way.  No trigger call is
 *		running then, so none can still be using them.  A stale entry is
 *		usually that of a dropped trigger, which no lookup would ever
 *		replace; one of a live trigger is parsed again at its next call.
 */
void
guard_config_at_xact_end(void)
{
	HASH_SEQ_STATUS status;
	GuardConfig *config;

	if (retired_configs_cxt != NULL)
		MemoryContextReset(retired_configs_cxt);
	if (guard_configs == NULL)
		return;
	hash_seq_init(&status, guard_configs);
	while ((config = hash_seq_search(&status)) != NULL)
	{
		if (config->valid)
			continue;
		if (config == last_config)
			last_config = NULL;
		MemoryContextDelete(config->cxt);
		(void) hash_search(guard_configs, &config->tgoid, HASH_REMOVE, NULL);
	}
}

/*
 * guard_config_init
 *		Register the cache invalidation; called from _PG_init.
 */
void
guard_config_init(void)
{
	CacheRegisterRelcacheCallback(guard_relcache_callback, (Datum) 0);
}

/*
 * Look up a column named in the trigger's arguments, refusing system ones;
 * is_token says which argument named it, for the message.
 */
static AttrNumber
guard_column(Trigger *trigger, Relation rel, const char *name, bool is_token)
{
	int			attnum = SPI_fnumber(RelationGetDescr(rel), name);

	if (attnum == SPI_ERROR_NOATTRIBUTE || attnum <= 0)
	{
		if (is_token)
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_COLUMN),
					 errmsg("token column \"%s\" of trigger \"%s\" does not exist in table \"%s\"",
							name, trigger->tgname,
							RelationGetRelationName(rel))));
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("resource column \"%s\" of trigger \"%s\" does not exist in table \"%s\"",
						name, trigger->tgname, RelationGetRelationName(rel))));
	}
	if (TupleDescAttr(RelationGetDescr(rel), attnum - 1)->attgenerated != '\0')
		ereport(ERROR,
				(errcode(ERRCODE_FENCING_GUARD_MISCONFIGURED),
				 is_token ?
				 errmsg("token column \"%s\" of trigger \"%s\" is a generated column",
						name, trigger->tgname) :
				 errmsg("resource column \"%s\" of trigger \"%s\" is a generated column",
						name, trigger->tgname),
				 errdetail("A BEFORE trigger sees a generated column before it is computed, so it would check a value other than the one stored.")));
	return (AttrNumber) attnum;
}

/* Refuse a default on the token column; where names the table that has it. */
static void
guard_refuse_default(Trigger *trigger, Relation rel, Oid where)
{
	const char *table = quote_qualified_identifier(get_namespace_name(get_rel_namespace(where)),
												   get_rel_name(where));

	ereport(ERROR,
			(errcode(ERRCODE_FENCING_GUARD_MISCONFIGURED),
			 where == RelationGetRelid(rel) ?
			 errmsg("token column \"%s\" of trigger \"%s\" has a default",
					trigger->tgargs[0], trigger->tgname) :
			 errmsg("token column \"%s\" of trigger \"%s\" has a default in table \"%s\", an ancestor of table \"%s\"",
					trigger->tgargs[0], trigger->tgname, get_rel_name(where),
					RelationGetRelationName(rel)),
			 errdetail("A trigger cannot tell a default from a token the statement wrote, so the default would override the declared token, or stand in for a missing one."),
			 errhint("Drop the default: ALTER TABLE %s ALTER COLUMN %s DROP DEFAULT.",
					 table, quote_identifier(trigger->tgargs[0]))));
}

/*
 * Refuse a default on the token column of rel or of any of its ancestors,
 * and remember the ancestors in config, whose invalidations make it stale.
 * A row inserted through a partitioned table, or through a table a
 * partitioned table is attached to, gets the defaults of the table the
 * INSERT names, not the partition's; an inheritance parent's default
 * applies only to its own rows, but is refused too, as one hierarchy has
 * one rule.  The catalogs are read without locking the ancestors: the
 * write holds no lock on them, and taking one under the partition's would
 * invert the order DDL on the parent locks in.
 */
static void
guard_check_defaults(GuardConfig *config, Trigger *trigger, Relation rel)
{
	List	   *queue = list_make1_oid(RelationGetRelid(rel));
	Relation	inhrel = table_open(InheritsRelationId, AccessShareLock);
	int			i;

	for (i = 0; i < list_length(queue); i++)
	{
		Oid			relid = list_nth_oid(queue, i);
		HeapTuple	atttuple;
		ScanKeyData key;
		SysScanDesc scan;
		HeapTuple	tuple;

		atttuple = SearchSysCacheAttName(relid, trigger->tgargs[0]);
		if (HeapTupleIsValid(atttuple))
		{
			bool		hasdef = ((Form_pg_attribute) GETSTRUCT(atttuple))->atthasdef;

			ReleaseSysCache(atttuple);
			if (hasdef)
				guard_refuse_default(trigger, rel, relid);
		}

		ScanKeyInit(&key, Anum_pg_inherits_inhrelid, BTEqualStrategyNumber,
					F_OIDEQ, ObjectIdGetDatum(relid));
		scan = systable_beginscan(inhrel, InheritsRelidSeqnoIndexId, true,
								  NULL, 1, &key);
		while (HeapTupleIsValid(tuple = systable_getnext(scan)))
			queue = list_append_unique_oid(queue,
										   ((Form_pg_inherits) GETSTRUCT(tuple))->inhparent);
		systable_endscan(scan);
	}
	table_close(inhrel, AccessShareLock);

	config->nancestors = list_length(queue) - 1;
	config->ancestors = palloc(Max(config->nancestors, 1) * sizeof(Oid));
	for (i = 0; i < config->nancestors; i++)
		config->ancestors[i] = list_nth_oid(queue, i + 1);
}

/*
 * Whether a type's text form is the same in every session.  A resource
 * name built from a timestamptz (TimeZone, DateStyle), a date, a float
 * (extra_float_digits), a bytea (bytea_output) or a money (lc_monetary)
 * would differ between sessions, and each spelling would have a mark of
 * its own: a stale writer could escape the mark by changing a setting.
 */
static bool
guard_type_is_stable(Oid typid, Oid extnsp)
{
	typid = getBaseType(typid);
	switch (typid)
	{
		case BOOLOID:
		case CHAROID:
		case NAMEOID:
		case INT2OID:
		case INT4OID:
		case INT8OID:
		case OIDOID:
		case TEXTOID:
		case BPCHAROID:
		case VARCHAROID:
		case NUMERICOID:
		case UUIDOID:
			return true;
		default:
			break;
	}
	if (type_is_enum(typid))
		return true;
	return typid == fence_token_type(extnsp);
}

/*
 * Whether a type's text is known to depend on session settings; other
 * types that guard_type_is_stable does not accept (arrays, composites,
 * json, ...) are refused for not being supported, not for that.
 */
static bool
guard_type_depends_on_settings(Oid typid)
{
	switch (getBaseType(typid))
	{
		case DATEOID:
		case TIMEOID:
		case TIMETZOID:
		case TIMESTAMPOID:
		case TIMESTAMPTZOID:
		case INTERVALOID:
		case FLOAT4OID:
		case FLOAT8OID:
		case BYTEAOID:
		case MONEYOID:
			return true;
		default:
			return false;
	}
}

/*
 * Add a part to config->parts, growing the array (of *maxparts) as need
 * be; the caller fills it in.
 */
static TemplatePart *
guard_add_part(GuardConfig *config, int *maxparts)
{
	if (config->nparts == *maxparts)
	{
		*maxparts *= 2;
		config->parts = repalloc(config->parts,
								 *maxparts * sizeof(TemplatePart));
	}
	return &config->parts[config->nparts++];
}

/* Parse argument 2, the resource template, into config->parts. */
static void
guard_parse_template(GuardConfig *config, Trigger *trigger, Relation rel,
					 const char *template)
{
	StringInfoData piece;
	const char *p = template;
	TemplatePiece kind;
	int			maxparts = 4;

	config->parts = MemoryContextAlloc(config->cxt,
									   maxparts * sizeof(TemplatePart));
	initStringInfo(&piece);

	while ((kind = resource_template_next(&p, &piece)) != TEMPLATE_END)
	{
		if (kind == TEMPLATE_LITERAL)
			guard_add_part(config, &maxparts)->literal =
				MemoryContextStrdup(config->cxt, piece.data);
		else if (kind == TEMPLATE_COLUMN)
		{
			const char *name = piece.data;
			TemplatePart *part = guard_add_part(config, &maxparts);
			Oid			typid;
			Oid			collation;
			Oid			typoutput;
			bool		typisvarlena;

			part->literal = NULL;
			part->attnum = guard_column(trigger, rel, name, false);
			if (part->attnum == config->token_attnum)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("resource template of trigger \"%s\" must not name the token column \"%s\"",
								trigger->tgname, name)));
			typid = TupleDescAttr(RelationGetDescr(rel), part->attnum - 1)->atttypid;
			if (!guard_type_is_stable(typid, config->extnsp))
			{
				if (guard_type_depends_on_settings(typid))
					ereport(ERROR,
							(errcode(ERRCODE_DATATYPE_MISMATCH),
							 errmsg("resource column \"%s\" of trigger \"%s\" has type %s, whose text depends on session settings",
									name, trigger->tgname, format_type_be(typid)),
							 errdetail("The same row would name different resources in sessions with different settings."),
							 errhint("Use a column of an integer, numeric, text, uuid, boolean or enum type.")));
				ereport(ERROR,
						(errcode(ERRCODE_DATATYPE_MISMATCH),
						 errmsg("resource column \"%s\" of trigger \"%s\" has type %s, which cannot name a resource",
								name, trigger->tgname, format_type_be(typid)),
						 errdetail("A placeholder takes one value of an integer, numeric, text, character, name, uuid, boolean, oid, enum or fence_token type, or of a domain over one."),
						 errhint("Give the row a column of one of those types that names its resource.")));
			}
			collation = TupleDescAttr(RelationGetDescr(rel), part->attnum - 1)->attcollation;
			if (OidIsValid(collation) && !get_collation_isdeterministic(collation))
				ereport(ERROR,
						(errcode(ERRCODE_DATATYPE_MISMATCH),
						 errmsg("resource column \"%s\" of trigger \"%s\" has a nondeterministic collation",
								name, trigger->tgname),
						 errdetail("Values equal under it are spelt differently, and each spelling would have a mark of its own.")));
			part->basetype = getBaseType(typid);
			getTypeOutputInfo(typid, &typoutput, &typisvarlena);
			fmgr_info_cxt(typoutput, &part->output, config->cxt);
		}
		else
			resource_template_refuse(template, trigger->tgname, kind);
	}
}

/*
 * Refuse the other row triggers of rel that would undo the guard's check:
 *
 * - another enabled fence_guard() trigger on the same token column: each
 *	 would take the token the other stamped, meant for the other's
 *	 resource, as its own;
 * - an enabled BEFORE ROW trigger that fires after the guard on INSERT or
 *	 UPDATE (BEFORE triggers fire in name order): it could change the
 *	 token or a placeholder column of a row already checked, and the row
 *	 would be stored unchecked.  A later BEFORE DELETE trigger can only
 *	 skip the delete.  Other guards are left alone: each writes only its
 *	 own token column.
 *
 * Re-checking in an AFTER trigger instead would queue an event per row.
 */
static void
guard_check_neighbours(FunctionCallInfo fcinfo, Trigger *trigger,
					   Relation rel, AttrNumber token_attnum)
{
	TriggerDesc *trigdesc = rel->trigdesc;
	bool		after_us = false;
	int			i;

	for (i = 0; trigdesc != NULL && i < trigdesc->numtriggers; i++)
	{
		Trigger    *other = &trigdesc->triggers[i];

		if (other->tgoid == trigger->tgoid)
		{
			after_us = true;
			continue;
		}
		if (other->tgenabled == TRIGGER_DISABLED ||
			!TRIGGER_FOR_ROW(other->tgtype))
			continue;
		if (other->tgfoid == fcinfo->flinfo->fn_oid)
		{
			if (other->tgnargs >= 1 &&
				SPI_fnumber(RelationGetDescr(rel), other->tgargs[0]) == token_attnum)
				ereport(ERROR,
						(errcode(ERRCODE_FENCING_GUARD_MISCONFIGURED),
						 errmsg("triggers \"%s\" and \"%s\" both guard token column \"%s\" of table \"%s\"",
								trigger->tgname, other->tgname,
								trigger->tgargs[0], RelationGetRelationName(rel)),
						 errdetail("Each would take the token the other stamped for its own resource."),
						 errhint("Drop one of them, or give each guard a token column of its own.")));
			continue;
		}
		if (after_us && TRIGGER_FOR_BEFORE(other->tgtype) &&
			((TRIGGER_FOR_INSERT(other->tgtype) && TRIGGER_FOR_INSERT(trigger->tgtype)) ||
			 (TRIGGER_FOR_UPDATE(other->tgtype) && TRIGGER_FOR_UPDATE(trigger->tgtype))))
			ereport(ERROR,
					(errcode(ERRCODE_FENCING_GUARD_MISCONFIGURED),
					 errmsg("trigger \"%s\" on table \"%s\" fires after guard \"%s\"",
							other->tgname, RelationGetRelationName(rel),
							trigger->tgname),
					 errdetail("BEFORE triggers fire in name order, and one firing after the guard could change the token or the resource of a row already checked."),
					 errhint("Rename trigger \"%s\" so that its name sorts before \"%s\", or rename the guard to sort last (fence_attach() names it \"~fence\").",
							 other->tgname, trigger->tgname)));
	}
}

/*
 * guard_refuse_shape
 *		Refuse a fence_guard() trigger with an UPDATE OF column list or a
 *		WHEN condition: either keeps it from firing for rows it must check.
 *		An UPDATE that assigns no listed column (SET tok = 1) would lower
 *		the row's token, or move it to another resource, unchecked; a row
 *		the condition skips would be written unchecked.  Called when such a
 *		trigger is created (ddl_guard.c) and when one made before 1.3
 *		fires.
 */
void
guard_refuse_shape(Trigger *trigger, Relation rel)
{
	if (trigger->tgnattr == 0 && trigger->tgqual == NULL)
		return;
	ereport(ERROR,
			(errcode(ERRCODE_FENCING_GUARD_SHAPE),
			 trigger->tgnattr > 0 ?
			 errmsg("guard trigger \"%s\" on table \"%s\" must not have an UPDATE OF column list",
					trigger->tgname, RelationGetRelationName(rel)) :
			 errmsg("guard trigger \"%s\" on table \"%s\" must not have a WHEN condition",
					trigger->tgname, RelationGetRelationName(rel)),
			 trigger->tgnattr > 0 ?
			 errdetail("An UPDATE that assigns none of the listed columns would not fire it, and could lower a row's token or move the row to another resource unchecked.") :
			 errdetail("A row the condition skips would be written without its token being checked."),
			 errhint("Create the guard as BEFORE INSERT OR UPDATE OR DELETE ... FOR EACH ROW, without a column list or a WHEN condition.")));
}

/*
 * guard_config
 *		The configuration of trigger on rel: its arguments parsed and
 *		validated against the table, cached until DDL invalidates them.
 */
GuardConfig *
guard_config(FunctionCallInfo fcinfo, Trigger *trigger, Relation rel)
{
	GuardConfig *config;
	bool		found;
	Oid			token_type;
	int			i;

	if (guard_configs == NULL)
	{
		HASHCTL		ctl;

		ctl.keysize = sizeof(Oid);
		ctl.entrysize = sizeof(GuardConfig);
		ctl.hcxt = CacheMemoryContext;
		guard_configs = hash_create("fence_guard configurations", 16, &ctl,
									HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	}

	/* Rows of a statement come one trigger at a time: try the last one. */
	if (last_config != NULL && last_config->tgoid == trigger->tgoid &&
		last_config->valid)
		return last_config;

	config = hash_search(guard_configs, &trigger->tgoid, HASH_FIND, NULL);
	if (config != NULL && config->valid)
		return last_config = config;

	if (trigger->tgnargs < 1)
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("trigger \"%s\" must name its token column",
						trigger->tgname),
				 errhint("Use fence_guard('token_column') or fence_guard('token_column', 'resource template').")));

	/*
	 * Build in a private context that becomes the entry's only when the
	 * arguments are all valid, so an error leaves nothing half-made.
	 */
	{
		GuardConfig draft;
		MemoryContext cxt = AllocSetContextCreate(CurrentMemoryContext,
												  "fence_guard configuration",
												  ALLOCSET_SMALL_SIZES);
		MemoryContext oldcxt = MemoryContextSwitchTo(cxt);

		memset(&draft, 0, sizeof(draft));
		draft.tgoid = trigger->tgoid;
		draft.relid = RelationGetRelid(rel);
		draft.extnsp = extension_schema_of_call(fcinfo);
		draft.cxt = cxt;

		draft.token_attnum = guard_column(trigger, rel, trigger->tgargs[0],
										  true);
		token_type = fence_token_type(draft.extnsp);
		if (TupleDescAttr(RelationGetDescr(rel),
						  draft.token_attnum - 1)->atttypid != token_type)
			ereport(ERROR,
					(errcode(ERRCODE_DATATYPE_MISMATCH),
					 errmsg("token column \"%s\" of trigger \"%s\" is not of type fence_token",
							trigger->tgargs[0], trigger->tgname)));

		guard_refuse_shape(trigger, rel);
		if (rel->rd_rel->relkind == RELKIND_FOREIGN_TABLE)
			ereport(ERROR,
					(errcode(ERRCODE_FENCING_FOREIGN_TABLE),
					 errmsg("guard trigger \"%s\" cannot fence foreign table \"%s\"",
							trigger->tgname, RelationGetRelationName(rel)),
					 errdetail("A foreign table's rows are written on its own server, where the marks of this database are not checked; its rows have no marks here."),
					 errhint("Detach the foreign table from the guarded table, and guard its rows on the server that holds them.")));
		guard_check_defaults(&draft, trigger, rel);
		guard_check_neighbours(fcinfo, trigger, rel, draft.token_attnum);

		if (trigger->tgnargs >= 2 && trigger->tgargs[1][0] != '\0')
			guard_parse_template(&draft, trigger, rel, trigger->tgargs[1]);

		/* A template without placeholders is the name of every row's resource. */
		if (draft.nparts == 1 && draft.parts[0].literal != NULL)
			resource_name_check(draft.parts[0].literal,
								strlen(draft.parts[0].literal));

		for (i = 2; i < trigger->tgnargs; i++)
		{
			if (strcmp(trigger->tgargs[i], "strict") == 0)
				draft.strict = true;
			else
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("unrecognized option \"%s\" for trigger \"%s\"",
								trigger->tgargs[i], trigger->tgname),
						 errhint("The only option is \"strict\".")));
		}

		MemoryContextSwitchTo(oldcxt);
		MemoryContextSetParent(cxt, CacheMemoryContext);
		draft.valid = true;

		/*
		 * Replace a stale entry in place: dynahash never moves an entry,
		 * so a caller further up the stack holding it sees the new one.
		 */
		config = hash_search(guard_configs, &trigger->tgoid, HASH_ENTER, &found);
		if (found)
		{
			if (retired_configs_cxt == NULL)
				retired_configs_cxt = AllocSetContextCreate(TopMemoryContext,
															"fence_guard retired configurations",
															ALLOCSET_SMALL_SIZES);
			MemoryContextSetParent(config->cxt, retired_configs_cxt);
		}
		*config = draft;
	}
	return last_config = config;
}
