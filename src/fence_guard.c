/*-------------------------------------------------------------------------
 *
 * fence_guard.c
 *	  The fence_guard() trigger: reject writes that carry a stale token.
 *
 *	  CREATE TRIGGER fence BEFORE INSERT OR UPDATE OR DELETE ON t
 *		  FOR EACH ROW EXECUTE FUNCTION fence_guard('tok', 'order:{id}');
 *
 * Argument 1 names the token column, of type fence_token.  Argument 2, a
 * resource template, chooses the scope:
 *
 * - absent or empty: row scope.  The row is the resource and its token
 *	 column is its mark: an UPDATE must set a token at least the row's.
 * - otherwise: resource scope.  {column} placeholders take that column's
 *	 text value ({{ and }} stand for braces), and the high-water mark of the
 *	 named resource, shared by every table that names it, is checked and
 *	 raised by marks.c.
 *
 * Further arguments are options: "strict" requires tokens strictly above
 * the mark.
 *
 * The token of a write is the token column's new value when the statement
 * sets it (for UPDATE: when the column is assigned, so that an UPDATE that
 * does not mention it cannot pass on the old row's token), else the token
 * declared for the resource (declared.c), stamped into the row, else the
 * write is rejected.  DELETE has only the declared token.
 *
 * IDENTIFICATION
 *	  src/fence_guard.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/sysattr.h"
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "declared.h"
#include "executor/executor.h"
#include "executor/spi.h"
#include "fence_guard.h"
#include "fence_token.h"
#include "fencing_errcodes.h"
#include "lib/stringinfo.h"
#include "marks.h"
#include "nodes/bitmapset.h"
#include "replica.h"
#include "storage/proc.h"
#include "utils/builtins.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/numeric.h"
#include "utils/rel.h"
#include "utils/syscache.h"
#include "utils/typcache.h"

/* One piece of a resource template: literal text, or a column's value. */
typedef struct TemplatePart
{
	char	   *literal;		/* NULL for a column */
	AttrNumber	attnum;
	Oid			basetype;		/* the column's type, under any domain */
	FmgrInfo	output;			/* the column type's output function */
} TemplatePart;

/* A trigger's parsed arguments, kept per trigger until DDL invalidates. */
typedef struct GuardConfig
{
	Oid			tgoid;			/* hash key */
	Oid			relid;
	Oid			extnsp;			/* schema of the extension's objects */
	AttrNumber	token_attnum;
	bool		strict;
	int			nparts;			/* 0 means row scope */
	TemplatePart *parts;
	MemoryContext cxt;			/* holds parts */
	bool		valid;			/* false once DDL may have changed it */
} GuardConfig;

static HTAB *guard_configs = NULL;
static GuardConfig *last_config = NULL; /* an entry of guard_configs */

/*
 * The token of the last UPDATE checked, for the DELETE half of a row moved
 * to another partition: that DELETE fires right after the UPDATE on the
 * same row and, having no NEW row, could not otherwise see the token the
 * statement set.  Kept for the transaction (a trigger running SQL between
 * the two halves must not make us forget it); a memo outliving its move
 * only ever supplies a token, which is still checked against the mark.
 */
static struct
{
	bool		valid;
	LocalTransactionId lxid;
	Oid			relid;
	ItemPointerData tid;
	FenceToken	token;
}			moving_row;

PG_FUNCTION_INFO_V1(fence_guard);
PG_FUNCTION_INFO_V1(fence_truncate_guard);

/*
 * Configurations made stale by DDL, and the memory of those replaced.
 * Invalidations arrive whenever a lock is taken, which can be in the
 * middle of a trigger call still using the configuration, so stale ones
 * are only marked here and replaced at the next lookup; the memory of a
 * replaced one is kept until the end of the transaction.
 */
static MemoryContext retired_configs_cxt = NULL;

/*
 * MERGE statements executing in this backend.  In a MERGE, tg_updatedcols
 * is the union of the columns of all its UPDATE actions, so the token
 * column can be listed when the action taken did not assign it.  Counted
 * by executor hooks; an error between start and end leaves the count too
 * high until the transaction ends, which only makes the check stricter.
 * If the library was loaded in the middle of a statement, the hooks missed
 * its start: loaded_mid_statement assumes a MERGE for the rest of that
 * transaction.  Preloading the library avoids that.
 */
static int	merges_running = 0;
static bool loaded_mid_statement = false;
static ExecutorStart_hook_type prev_ExecutorStart = NULL;
static ExecutorEnd_hook_type prev_ExecutorEnd = NULL;

static void
guard_ExecutorStart(QueryDesc *queryDesc, int eflags)
{
	if (prev_ExecutorStart)
		prev_ExecutorStart(queryDesc, eflags);
	else
		standard_ExecutorStart(queryDesc, eflags);
	if (queryDesc->operation == CMD_MERGE)
		merges_running++;
}

static void
guard_ExecutorEnd(QueryDesc *queryDesc)
{
	if (queryDesc->operation == CMD_MERGE && merges_running > 0)
		merges_running--;
	if (prev_ExecutorEnd)
		prev_ExecutorEnd(queryDesc);
	else
		standard_ExecutorEnd(queryDesc);
}

/* Whether the row being written may be written by a MERGE. */
static bool
guard_in_merge(void)
{
	if (merges_running > 0)
		return true;
	/*
	 * Loaded in the middle of a statement, whose start went unseen: it, or
	 * a statement it runs, may be a MERGE, until the transaction ends.
	 */
	return loaded_mid_statement;
}

/*
 * Whether the UPDATE being checked assigns the token column.  In a MERGE,
 * a token equal to the old row's may be the old row's, carried over by an
 * action that does not assign it: that is no token from the statement.
 */
static bool
guard_update_sets_token(TriggerData *trigdata, AttrNumber attnum)
{
	TupleDesc	tupdesc = RelationGetDescr(trigdata->tg_relation);
	Datum		oldvalue;
	Datum		newvalue;
	bool		oldnull;
	bool		newnull;

	if (!bms_is_member(attnum - FirstLowInvalidHeapAttributeNumber,
					   trigdata->tg_updatedcols))
		return false;
	if (!guard_in_merge())
		return true;
	oldvalue = heap_getattr(trigdata->tg_trigtuple, attnum, tupdesc, &oldnull);
	newvalue = heap_getattr(trigdata->tg_newtuple, attnum, tupdesc, &newnull);
	return oldnull || newnull ||
		DatumGetFenceToken(oldvalue) != DatumGetFenceToken(newvalue);
}

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
		if (relid == InvalidOid || config->relid == relid)
			config->valid = false;
	}
}

/*
 * fence_guard_at_xact_end
 *		Free replaced configurations and forget statement tracking; called
 *		when a transaction ends, whichever way.
 */
void
fence_guard_at_xact_end(void)
{
	if (retired_configs_cxt != NULL)
		MemoryContextReset(retired_configs_cxt);
	merges_running = 0;
	loaded_mid_statement = false;
}

/*
 * fence_guard_init
 *		Register the cache invalidation; called from _PG_init.
 */
void
fence_guard_init(void)
{
	CacheRegisterRelcacheCallback(guard_relcache_callback, (Datum) 0);
	prev_ExecutorStart = ExecutorStart_hook;
	ExecutorStart_hook = guard_ExecutorStart;
	prev_ExecutorEnd = ExecutorEnd_hook;
	ExecutorEnd_hook = guard_ExecutorEnd;
	loaded_mid_statement = IsTransactionState();
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
	return (AttrNumber) attnum;
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
	return typid == GetSysCacheOid2(TYPENAMENSP, Anum_pg_type_oid,
									CStringGetDatum("fence_token"),
									ObjectIdGetDatum(extnsp));
}

/* Parse argument 2, the resource template, into config->parts. */
static void
guard_parse_template(GuardConfig *config, Trigger *trigger, Relation rel,
					 const char *template)
{
	StringInfoData literal;
	const char *p = template;
	int			maxparts = 4;

	config->parts = MemoryContextAlloc(config->cxt,
									   maxparts * sizeof(TemplatePart));
	initStringInfo(&literal);

	for (;;)
	{
		bool		flush = *p == '\0' || (*p == '{' && p[1] != '{');

		if (flush && literal.len > 0)
		{
			if (config->nparts == maxparts)
			{
				maxparts *= 2;
				config->parts = repalloc(config->parts,
										 maxparts * sizeof(TemplatePart));
			}
			config->parts[config->nparts].literal =
				MemoryContextStrdup(config->cxt, literal.data);
			config->nparts++;
			resetStringInfo(&literal);
		}
		if (*p == '\0')
			break;

		if ((p[0] == '{' && p[1] == '{') || (p[0] == '}' && p[1] == '}'))
		{
			appendStringInfoChar(&literal, *p);
			p += 2;
		}
		else if (*p == '}')
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("invalid resource template \"%s\" for trigger \"%s\"",
							template, trigger->tgname),
					 errdetail("A \"}\" outside a placeholder must be doubled.")));
		else if (*p == '{')
		{
			const char *end = strchr(p + 1, '}');
			char	   *name;
			TemplatePart *part;
			Oid			typid;
			Oid			collation;
			Oid			typoutput;
			bool		typisvarlena;

			if (end == NULL || end == p + 1 || memchr(p + 1, '{', end - p - 1))
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("invalid resource template \"%s\" for trigger \"%s\"",
								template, trigger->tgname),
						 errdetail("A placeholder is \"{\", a column name and \"}\"; write \"{{\" for a literal brace.")));
			name = pnstrdup(p + 1, end - p - 1);

			if (config->nparts == maxparts)
			{
				maxparts *= 2;
				config->parts = repalloc(config->parts,
										 maxparts * sizeof(TemplatePart));
			}
			part = &config->parts[config->nparts++];
			part->literal = NULL;
			part->attnum = guard_column(trigger, rel, name, false);
			if (part->attnum == config->token_attnum)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("resource template of trigger \"%s\" must not name the token column \"%s\"",
								trigger->tgname, name)));
			typid = TupleDescAttr(RelationGetDescr(rel), part->attnum - 1)->atttypid;
			if (!guard_type_is_stable(typid, config->extnsp))
				ereport(ERROR,
						(errcode(ERRCODE_DATATYPE_MISMATCH),
						 errmsg("resource column \"%s\" of trigger \"%s\" has type %s, whose text depends on session settings",
								name, trigger->tgname, format_type_be(typid)),
						 errdetail("The same row would name different resources in sessions with different settings."),
						 errhint("Use a column of an integer, numeric, text, uuid, boolean or enum type, for example a generated column.")));
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
			p = end + 1;
		}
		else
			appendStringInfoChar(&literal, *p++);
	}
}

/* Parse and validate the trigger's arguments against its table. */
static GuardConfig *
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
		draft.extnsp = get_func_namespace(fcinfo->flinfo->fn_oid);
		draft.cxt = cxt;

		draft.token_attnum = guard_column(trigger, rel, trigger->tgargs[0],
										  true);
		token_type = GetSysCacheOid2(TYPENAMENSP, Anum_pg_type_oid,
									 CStringGetDatum("fence_token"),
									 ObjectIdGetDatum(draft.extnsp));
		if (TupleDescAttr(RelationGetDescr(rel),
						  draft.token_attnum - 1)->atttypid != token_type)
			ereport(ERROR,
					(errcode(ERRCODE_DATATYPE_MISMATCH),
					 errmsg("token column \"%s\" of trigger \"%s\" is not of type fence_token",
							trigger->tgargs[0], trigger->tgname)));

		if (trigger->tgnargs >= 2 && trigger->tgargs[1][0] != '\0')
			guard_parse_template(&draft, trigger, rel, trigger->tgargs[1]);

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

/* The resource a row belongs to, by the trigger's template. */
static const char *
guard_resource(GuardConfig *config, Trigger *trigger, HeapTuple tuple,
			   TupleDesc tupdesc)
{
	StringInfoData buf;
	int			i;

	/* A template without placeholders names one resource for every row. */
	if (config->nparts == 1 && config->parts[0].literal != NULL)
		return config->parts[0].literal;

	initStringInfo(&buf);
	for (i = 0; i < config->nparts; i++)
	{
		TemplatePart *part = &config->parts[i];
		Datum		value;
		bool		isnull;

		if (part->literal != NULL)
		{
			appendStringInfoString(&buf, part->literal);
			continue;
		}
		value = heap_getattr(tuple, part->attnum, tupdesc, &isnull);
		if (isnull)
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("column \"%s\" of the resource of trigger \"%s\" is null",
							NameStr(TupleDescAttr(tupdesc, part->attnum - 1)->attname),
							trigger->tgname),
					 errdetail("A fenced row must name its resource.")));
		/*
		 * Values that compare equal must name one resource: numeric 42 and
		 * 42.0, character(n) with or without trailing blanks.
		 */
		if (part->basetype == NUMERICOID)
			appendStringInfoString(&buf, numeric_normalize(DatumGetNumeric(value)));
		else if (part->basetype == BPCHAROID)
		{
			char	   *text = OutputFunctionCall(&part->output, value);
			int			len = strlen(text);

			while (len > 0 && text[len - 1] == ' ')
				len--;
			appendBinaryStringInfo(&buf, text, len);
		}
		else
			appendStringInfoString(&buf, OutputFunctionCall(&part->output, value));
	}
	return buf.data;
}

/*
 * Reject a write that carries no token: the statement set the token column
 * to NULL, or did not set it and nothing was declared.  resource is NULL
 * in row scope.
 */
static void
guard_no_token(const char *resource, Trigger *trigger, Relation rel,
			   const char *column, bool set_to_null)
{
	if (set_to_null)
		ereport(ERROR,
				(errcode(ERRCODE_FENCING_NO_TOKEN),
				 resource ?
				 errmsg("fence token of write to resource \"%s\" is null", resource) :
				 errmsg("fence token of write to table \"%s\" is null",
						RelationGetRelationName(rel)),
				 errdetail("The statement set column \"%s\" to null.", column)));
	if (resource == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_FENCING_NO_TOKEN),
				 errmsg("write to table \"%s\" carries no fence token",
						RelationGetRelationName(rel)),
				 errdetail("Trigger \"%s\" checks each row's own token, so the statement must set column \"%s\".",
						   trigger->tgname, column)));
	ereport(ERROR,
			(errcode(ERRCODE_FENCING_NO_TOKEN),
			 errmsg("write to resource \"%s\" carries no fence token", resource),
			 errdetail("The statement did not set column \"%s\" of table \"%s\", and this session has not declared a token for the resource.",
					   column, RelationGetRelationName(rel)),
			 errhint("Set the token column, or declare the token first with fence_use() or fenced_acquire().")));
}

/*
 * The token a write to resource carries: the statement's, or if the
 * statement does not set the column the declared one.  Rejects the write
 * if there is neither.
 */
static FenceToken
guard_token(const char *resource, bool statement_sets, HeapTuple newtuple,
			Trigger *trigger, Relation rel, AttrNumber attnum)
{
	FenceToken	token;

	if (statement_sets)
	{
		bool		isnull;
		Datum		value = heap_getattr(newtuple, attnum,
										 RelationGetDescr(rel), &isnull);

		if (isnull)
			guard_no_token(resource, trigger, rel, trigger->tgargs[0], true);
		return DatumGetFenceToken(value);
	}
	if (resource == NULL || !declared_lookup(resource, &token))
		guard_no_token(resource, trigger, rel, trigger->tgargs[0], false);
	return token;
}

/* Write token into the token column of tuple. */
static HeapTuple
guard_stamp(HeapTuple tuple, TupleDesc tupdesc, AttrNumber attnum,
			FenceToken token)
{
	int			cols[1];
	Datum		values[1];
	bool		nulls[1] = {false};

	cols[0] = attnum;
	values[0] = FenceTokenGetDatum(token);
	return heap_modify_tuple_by_cols(tuple, tupdesc, 1, cols, values, nulls);
}

/* Row scope: the row's own token column is its mark. */
static HeapTuple
guard_row_scope(TriggerData *trigdata, GuardConfig *config)
{
	Trigger    *trigger = trigdata->tg_trigger;
	Relation	rel = trigdata->tg_relation;
	TupleDesc	tupdesc = RelationGetDescr(rel);
	HeapTuple	newtuple;
	FenceToken	token;
	Datum		old;
	bool		oldnull;

	if (TRIGGER_FIRED_BY_DELETE(trigdata->tg_event))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("trigger \"%s\" cannot guard DELETE without a resource template",
						trigger->tgname),
				 errdetail("A deleted row has no new token to check against its own."),
				 errhint("Give the trigger a resource template, so that DELETE is checked against the resource's mark.")));

	if (TRIGGER_FIRED_BY_INSERT(trigdata->tg_event))
	{
		newtuple = trigdata->tg_trigtuple;
		if (heap_attisnull(newtuple, config->token_attnum, tupdesc))
			guard_no_token(NULL, trigger, rel, trigger->tgargs[0], false);
		return newtuple;
	}

	newtuple = trigdata->tg_newtuple;
	token = guard_token(NULL, guard_update_sets_token(trigdata, config->token_attnum),
						newtuple, trigger, rel, config->token_attnum);

	/*
	 * In strict mode an equal token is stale, unless this transaction wrote
	 * the row with it: the holder may update its row more than once.
	 */
	old = heap_getattr(trigdata->tg_trigtuple, config->token_attnum, tupdesc,
					   &oldnull);
	if (!oldnull &&
		(token < DatumGetFenceToken(old) ||
		 (config->strict && token == DatumGetFenceToken(old) &&
		  !TransactionIdIsCurrentTransactionId(HeapTupleHeaderGetXmin(trigdata->tg_trigtuple->t_data)))))
	{
		char		offered[FENCE_TOKEN_TEXT_LEN];
		char		current[FENCE_TOKEN_TEXT_LEN];

		fence_token_to_cstring(token, offered);
		fence_token_to_cstring(DatumGetFenceToken(old), current);
		ereport(ERROR,
				(errcode(ERRCODE_FENCING_STALE_TOKEN),
				 errmsg("stale fence token for a row of table \"%s\"",
						RelationGetRelationName(rel)),
				 token == DatumGetFenceToken(old) ?
				 errdetail("Token %s is not above the row's token %s, and trigger \"%s\" requires strictly increasing tokens.",
						   offered, current, trigger->tgname) :
				 errdetail("Token %s is below the row's token %s.",
						   offered, current),
				 errhint("A newer lock holder has written this row; acquire the lock again for a new token.")));
	}
	return newtuple;
}

/* Resource scope: check, and raise, the named resources' marks. */
static HeapTuple
guard_resource_scope(TriggerData *trigdata, GuardConfig *config)
{
	Trigger    *trigger = trigdata->tg_trigger;
	Relation	rel = trigdata->tg_relation;
	TupleDesc	tupdesc = RelationGetDescr(rel);
	AttrNumber	attnum = config->token_attnum;
	TriggerEvent event = trigdata->tg_event;
	HeapTuple	oldtuple = trigdata->tg_trigtuple;
	HeapTuple	newtuple = NULL;
	const char *old_resource = NULL;
	const char *new_resource = NULL;
	FenceToken	old_token = 0;
	FenceToken	new_token = 0;
	bool		statement_sets;

	if (TRIGGER_FIRED_BY_DELETE(event))
	{
		old_resource = guard_resource(config, trigger, oldtuple, tupdesc);
		if (moving_row.valid && moving_row.lxid == MyProc->lxid &&
			moving_row.relid == RelationGetRelid(rel) &&
			ItemPointerEquals(&moving_row.tid, &oldtuple->t_self))
			old_token = moving_row.token;
		else
			old_token = guard_token(old_resource, false, NULL, trigger, rel,
									attnum);
		moving_row.valid = false;
		marks_check(config->extnsp, old_resource, old_token, config->strict);
		return oldtuple;
	}

	if (TRIGGER_FIRED_BY_INSERT(event))
	{
		newtuple = oldtuple;
		statement_sets = !heap_attisnull(newtuple, attnum, tupdesc);
	}
	else
	{
		newtuple = trigdata->tg_newtuple;
		statement_sets = guard_update_sets_token(trigdata, attnum);
		old_resource = guard_resource(config, trigger, oldtuple, tupdesc);
	}
	new_resource = guard_resource(config, trigger, newtuple, tupdesc);

	new_token = guard_token(new_resource, statement_sets, newtuple, trigger,
							rel, attnum);
	if (!statement_sets)
		newtuple = guard_stamp(newtuple, tupdesc, attnum, new_token);

	if (old_resource == NULL || strcmp(old_resource, new_resource) == 0)
		marks_check(config->extnsp, new_resource, new_token, config->strict);
	else
	{
		/*
		 * The row moves from one resource to another: the write must be
		 * allowed on both.  Lock the marks in a fixed order, so that two
		 * rows moving opposite ways cannot deadlock on them.
		 */
		old_token = guard_token(old_resource, statement_sets, newtuple,
								trigger, rel, attnum);
		if (strcmp(old_resource, new_resource) < 0)
		{
			marks_check(config->extnsp, old_resource, old_token, config->strict);
			marks_check(config->extnsp, new_resource, new_token, config->strict);
		}
		else
		{
			marks_check(config->extnsp, new_resource, new_token, config->strict);
			marks_check(config->extnsp, old_resource, old_token, config->strict);
		}
	}

	if (TRIGGER_FIRED_BY_UPDATE(event))
	{
		moving_row.valid = true;
		moving_row.lxid = MyProc->lxid;
		moving_row.relid = RelationGetRelid(rel);
		moving_row.tid = oldtuple->t_self;
		moving_row.token = old_resource && strcmp(old_resource, new_resource) != 0 ?
			old_token : new_token;
	}
	return newtuple;
}

/*
 * A write replicated from a publisher, which fenced it: accept it, and
 * raise this subscriber's marks to the token it carries (replica.c).
 */
static HeapTuple
guard_replicated(TriggerData *trigdata, GuardConfig *config)
{
	TupleDesc	tupdesc = RelationGetDescr(trigdata->tg_relation);
	HeapTuple	newtuple;
	bool		isnull;
	Datum		token;

	if (TRIGGER_FIRED_BY_DELETE(trigdata->tg_event))
		return trigdata->tg_trigtuple;
	newtuple = TRIGGER_FIRED_BY_UPDATE(trigdata->tg_event) ?
		trigdata->tg_newtuple : trigdata->tg_trigtuple;
	token = heap_getattr(newtuple, config->token_attnum, tupdesc, &isnull);
	if (config->nparts == 0 || isnull)
		return newtuple;
	replica_raise(config->extnsp,
				  guard_resource(config, trigdata->tg_trigger, newtuple, tupdesc),
				  DatumGetFenceToken(token));
	if (TRIGGER_FIRED_BY_UPDATE(trigdata->tg_event))
		replica_raise(config->extnsp,
					  guard_resource(config, trigdata->tg_trigger,
									 trigdata->tg_trigtuple, tupdesc),
					  DatumGetFenceToken(token));
	return newtuple;
}

/*
 * fence_guard
 *		BEFORE INSERT OR UPDATE OR DELETE FOR EACH ROW trigger that rejects
 *		writes whose token is below the resource's high-water mark.
 */
Datum
fence_guard(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = (TriggerData *) fcinfo->context;
	Trigger    *trigger;
	GuardConfig *config;

	/* make sure it's called as a trigger at all */
	if (!CALLED_AS_TRIGGER(fcinfo))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("fence_guard: must be called as trigger")));
	trigger = trigdata->tg_trigger;

	/* and that it's called for each row */
	if (!TRIGGER_FIRED_FOR_ROW(trigdata->tg_event))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("trigger \"%s\" on table \"%s\" must be FOR EACH ROW",
						trigger->tgname,
						RelationGetRelationName(trigdata->tg_relation)),
				 errhint("fence_guard() checks each row's token.")));

	/* and before the write, so that a rejected row is never written */
	if (!TRIGGER_FIRED_BEFORE(trigdata->tg_event))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("trigger \"%s\" on table \"%s\" must be BEFORE",
						trigger->tgname,
						RelationGetRelationName(trigdata->tg_relation)),
				 errhint("fence_guard() must run before the row is written.")));

	config = guard_config(fcinfo, trigger, trigdata->tg_relation);

	if (replica_applying())
		return PointerGetDatum(guard_replicated(trigdata, config));
	if (config->nparts == 0)
		return PointerGetDatum(guard_row_scope(trigdata, config));
	return PointerGetDatum(guard_resource_scope(trigdata, config));
}

/*
 * fence_truncate_guard
 *		BEFORE TRUNCATE trigger that refuses to truncate a fenced table,
 *		since TRUNCATE fires no row triggers.
 */
Datum
fence_truncate_guard(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = (TriggerData *) fcinfo->context;

	if (!CALLED_AS_TRIGGER(fcinfo))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("fence_truncate_guard: must be called as trigger")));
	if (!TRIGGER_FIRED_BY_TRUNCATE(trigdata->tg_event) ||
		!TRIGGER_FIRED_BEFORE(trigdata->tg_event))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("trigger \"%s\" on table \"%s\" must be BEFORE TRUNCATE",
						trigdata->tg_trigger->tgname,
						RelationGetRelationName(trigdata->tg_relation))));

	ereport(ERROR,
			(errcode(ERRCODE_FENCING_DDL_UNFENCES),
			 errmsg("cannot truncate fenced table \"%s\"",
					RelationGetRelationName(trigdata->tg_relation)),
			 errdetail("TRUNCATE fires no row triggers, so it would bypass the fence token check."),
			 errhint("Delete the rows with a fence token instead, or drop trigger \"%s\" first.",
					 trigdata->tg_trigger->tgname)));
	PG_RETURN_NULL();			/* keep compiler quiet */
}
