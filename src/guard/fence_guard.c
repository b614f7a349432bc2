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
 * the mark.  A MERGE is told apart by executor hooks installed here
 * (guard_in_merge).
 *
 * The token of a write is the token column's new value when the statement
 * sets it (for UPDATE: when the column is assigned, so that an UPDATE that
 * does not mention it cannot pass on the old row's token), else the token
 * declared for the resource (declared.c), stamped into the row, else the
 * write is rejected; a declared token overrides the statement's, lower
 * or higher (guard_token).  DELETE has only the declared token.
 *
 * IDENTIFICATION
 *	  src/guard/fence_guard.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/sysattr.h"
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "core/core.h"
#include "core/pg_compat.h"
#include "executor/executor.h"
#include "fencing_errcodes.h"
#include "guard/guard.h"
#include "lib/stringinfo.h"
#include "marks/marks.h"
#include "nodes/bitmapset.h"
#include "stats/stats.h"
#include "storage/proc.h"
#include "tcop/pquery.h"
#include "utils/builtins.h"
#include "utils/portal.h"
#include "utils/rel.h"

/*
 * MERGE statements executing in this backend.  In a MERGE, tg_updatedcols
 * is the union of the columns of all its UPDATE actions, so the token
 * column can be listed when the action taken did not assign it.  Counted
 * by executor hooks; an error between start and end leaves the count too
 * high until the transaction ends, which only makes the check stricter.
 *
 * If the library was loaded while a portal ran (the first fenced write of
 * a session, without preloading), the hooks missed the start of the
 * portal's statement and of any statement running under it.
 * guard_note_load() then counts the portal's statement if it is a MERGE
 * (its end is seen), and otherwise, since a trigger or function under it
 * may be running a MERGE, sets loaded_in_portal: a MERGE is assumed while
 * that portal runs.  A load at parse, plan or bind time (a token literal
 * or parameter) comes before the executor and misses nothing.
 */
static int	merges_running = 0;
static Portal loaded_in_portal = NULL;
static ExecutorStart_hook_type prev_ExecutorStart = NULL;
static ExecutorEnd_hook_type prev_ExecutorEnd = NULL;

/*
 * The token of the last UPDATE checked, for the DELETE half of a row moved
 * to another partition: that DELETE fires right after the UPDATE on the
 * same row and, having no NEW row, could not otherwise see the token the
 * statement set.  Kept only for an UPDATE of a partition, whose rows alone
 * can move, and only within its subtransaction (a trigger running SQL
 * between the two halves must not make us forget it, but a tokenless
 * DELETE of the row after ROLLBACK TO SAVEPOINT must not find it).  An
 * UPDATE of the row skipped after the guard passed it would leave the
 * memo matching the row; only a later BEFORE trigger could skip it, and
 * guard_config.c refuses those.
 */
static struct
{
	bool		valid;
	LocalTransactionId lxid;
	SubTransactionId subid;		/* a rolled-back savepoint ends the memo */
	Oid			relid;
	ItemPointerData tid;
	FenceToken	token;
}			moving_row;

PG_FUNCTION_INFO_V1(fence_guard);
PG_FUNCTION_INFO_V1(fence_truncate_guard);

/* Count a MERGE starting. */
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

/* Count a MERGE ending. */
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

/*
 * guard_in_merge
 *		Whether the row being written may be written by a MERGE.
 */
bool
guard_in_merge(void)
{
	if (merges_running > 0)
		return true;

	/*
	 * Loaded while this portal runs, whose start went unseen: a statement
	 * under it may be a MERGE.
	 */
	return loaded_in_portal != NULL && loaded_in_portal == ActivePortal;
}

/*
 * guard_note_load
 *		Account for the statements whose start the executor hooks missed,
 *		the library being loaded while a portal runs.
 */
static void
guard_note_load(void)
{
	if (ActivePortal == NULL || ActivePortal->status != PORTAL_ACTIVE)
		return;
	if (ActivePortal->commandTag == CMDTAG_MERGE)
		merges_running++;
	else
		loaded_in_portal = ActivePortal;
}

/*
 * guard_merges_init
 *		Install the executor hooks that count MERGE statements, and count
 *		those running already.
 */
void
guard_merges_init(void)
{
	prev_ExecutorStart = ExecutorStart_hook;
	ExecutorStart_hook = guard_ExecutorStart;
	prev_ExecutorEnd = ExecutorEnd_hook;
	ExecutorEnd_hook = guard_ExecutorEnd;
	guard_note_load();
}

/* A transaction ended: no statement of it is running. */
void
guard_merges_at_xact_end(void)
{
	merges_running = 0;
	loaded_in_portal = NULL;
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

/*
 * The resource a row belongs to, by the trigger's template.  A new row's
 * value must not contain the separator that follows its placeholder
 * (resource_template_name); an old row is named as it always was.
 */
static const char *
guard_resource(GuardConfig *config, Trigger *trigger, HeapTuple tuple,
			   TupleDesc tupdesc, bool new_row)
{
	/* Without placeholders, one resource for every row: no call per row. */
	if (config->nparts == 1 && config->parts[0].literal != NULL)
		return config->parts[0].literal;
	return resource_template_name(config->parts, config->nparts, tuple,
								  tupdesc, trigger->tgname, new_row);
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
	stats_count(STATS_REJECTED_NO_TOKEN);
	stats_rejected_resource(resource, false);
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
 * The token a write to resource carries, by the precedence doc/clients.md
 * documents:
 *
 * - the session or transaction declared D for the resource: D, whatever
 *	 the statement sets.  The declaration is the holder's word; a statement
 *	 token, lower or higher, is ignored and the row stamped with D.  ORMs
 *	 write every loaded column back, and the row loaded may carry a newer
 *	 holder's token: letting the higher one win would let a stale holder
 *	 write with its successor's token;
 * - nothing declared, the statement sets T (not NULL): T;
 * - neither: the write is rejected.
 *
 * *stamp says whether the token differs from the row's, which must then
 * carry it.  *step is how far above the mark the token may be: a token
 * the statement alone supplies is bounded by fencing.max_token_step, a
 * declared one is not (0).  In row scope (resource NULL) nothing is
 * declared.
 */
static FenceToken
guard_token(const char *resource, bool statement_sets, HeapTuple newtuple,
			Trigger *trigger, Relation rel, AttrNumber attnum, bool *stamp,
			FenceToken *step)
{
	FenceToken	declared = 0;
	bool		isnull = true;
	Datum		value = (Datum) 0;

	if (statement_sets)
		value = heap_getattr(newtuple, attnum, RelationGetDescr(rel), &isnull);

	if (resource != NULL && declared_lookup(resource, &declared))
	{
		*stamp = isnull || DatumGetFenceToken(value) != declared;
		*step = 0;
		return declared;
	}
	if (!statement_sets || isnull)
		guard_no_token(resource, trigger, rel, trigger->tgargs[0],
					   statement_sets);
	*stamp = false;
	*step = guard_max_token_step();
	return DatumGetFenceToken(value);
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

/*
 * In resource scope the old row's own token is a floor under the mark: a
 * row written at 35 must not be overwritten at 1 where its resource's mark
 * was forgotten (fence_forget_idle), never restored, or created anew below
 * it by a later INSERT.  The token is in the trigger tuple already, so
 * this costs no lookup.  Checked after the mark, so that the mark is
 * what a rejection names whenever it alone refuses the write.
 */
static void
guard_row_floor(const char *resource, HeapTuple oldtuple, Relation rel,
				AttrNumber attnum, FenceToken token)
{
	char		offered[FENCE_TOKEN_TEXT_LEN];
	char		floor[FENCE_TOKEN_TEXT_LEN];
	bool		isnull;
	Datum		value = heap_getattr(oldtuple, attnum, RelationGetDescr(rel),
									 &isnull);

	if (isnull || token >= DatumGetFenceToken(value))
		return;
	stats_count(STATS_REJECTED_STALE);
	stats_rejected_resource(resource, true);
	fence_token_to_cstring(token, offered);
	fence_token_to_cstring(DatumGetFenceToken(value), floor);
	ereport(ERROR,
			(errcode(ERRCODE_FENCING_STALE_TOKEN),
			 errmsg("stale fence token for resource \"%s\"", resource),
			 errdetail("Token %s is below the token %s that the row of table \"%s\" carries.",
					   offered, floor, RelationGetRelationName(rel)),
			 errhint("A newer lock holder has written this row; acquire the lock again for a new token."),
			 stale_hint_token_sources(token, DatumGetFenceToken(value))));
}

/*
 * An INSERT of an INSERT ... ON CONFLICT (guard_conflict.c).  A row that
 * conflicts with one there will not go in: its token is checked against
 * the mark, which is not raised (a DO UPDATE's update is checked as any),
 * and the row is checked again when the statement has run, in case the
 * row it conflicted with was gone by the arbitration.  Otherwise the mark
 * is checked and raised as for any insert; if a conflicting row went in
 * meanwhile (the check may have waited for the mark's lock, held by its
 * inserter), the raise would stand without the row, so the statement
 * fails with a serialization failure, to be retried.
 */
static HeapTuple
guard_insert_or_nothing(Relation rel, HeapTuple newtuple,
						const char *resource, FenceToken token, bool strict,
						FenceToken step)
{
	FenceToken	mark;
	ItemPointerData conflict;

	if (guard_row_conflicts(rel, newtuple, &conflict))
	{
		if (marks_read(resource, &mark) && token < mark)
			marks_report_stale(resource, NULL, NULL, token, mark);
		guard_conflict_pass(rel, &conflict, resource, token, strict, step);
		return newtuple;
	}
	marks_check(resource, token, strict, step);
	if (guard_row_conflicts(rel, newtuple, NULL))
		ereport(ERROR,
				(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
				 errmsg("could not serialize access due to a concurrent insert into table \"%s\"",
						RelationGetRelationName(rel)),
				 errdetail("A row this INSERT ... ON CONFLICT conflicts with was inserted while the mark of resource \"%s\" was checked.",
						   resource)));
	return newtuple;
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
	bool		stamp;
	FenceToken	step;

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
						newtuple, trigger, rel, config->token_attnum, &stamp,
						&step);

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
		marks_report_stale(NULL, RelationGetRelationName(rel), trigger->tgname,
						   token, DatumGetFenceToken(old));

	/* The row's token is its mark: fencing.max_token_step bounds it too. */
	if (!oldnull && step > 0 && token > DatumGetFenceToken(old) &&
		token - DatumGetFenceToken(old) > step)
	{
		char		offered[FENCE_TOKEN_TEXT_LEN];
		char		current[FENCE_TOKEN_TEXT_LEN];
		char		limit[FENCE_TOKEN_TEXT_LEN];

		fence_token_to_cstring(token, offered);
		fence_token_to_cstring(DatumGetFenceToken(old), current);
		fence_token_to_cstring(step, limit);
		ereport(ERROR,
				(errcode(ERRCODE_FENCING_TOKEN_STEP),
				 errmsg("fence token %s for a row of table \"%s\" is too far above the row's token %s",
						offered, RelationGetRelationName(rel), current),
				 errdetail("A token may raise the row's token by at most fencing.max_token_step (%s).",
						   limit)));
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
	HeapTuple	stmt_tuple;
	const char *old_resource = NULL;
	const char *new_resource = NULL;
	FenceToken	old_token = 0;
	FenceToken	new_token = 0;
	bool		statement_sets;
	bool		stamp;
	FenceToken	step;
	bool		repeated;
	uint64		declared_gen;

	if (TRIGGER_FIRED_BY_DELETE(event))
	{
		old_resource = guard_resource(config, trigger, oldtuple, tupdesc, false);
		if (moving_row.valid && moving_row.lxid == FencingLocalTransactionId() &&
			moving_row.subid == GetCurrentSubTransactionId() &&
			moving_row.relid == RelationGetRelid(rel) &&
			ItemPointerEquals(&moving_row.tid, &oldtuple->t_self))
			old_token = moving_row.token;
		else
			old_token = guard_token(old_resource, false, NULL, trigger, rel,
									attnum, &stamp, &step);
		moving_row.valid = false;
		marks_check(old_resource, old_token, config->strict, 0);
		guard_row_floor(old_resource, oldtuple, rel, attnum, old_token);
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
		old_resource = guard_resource(config, trigger, oldtuple, tupdesc, false);
	}
	new_resource = guard_resource(config, trigger, newtuple, tupdesc, true);

	declared_gen = declared_generation();
	repeated = guard_repeats(config, new_resource, statement_sets, newtuple,
							 tupdesc, &new_token, &stamp);
	if (!repeated)
		new_token = guard_token(new_resource, statement_sets, newtuple,
								trigger, rel, attnum, &stamp, &step);
	stmt_tuple = newtuple;		/* the statement's token, for the old resource */
	if (stamp)
		newtuple = guard_stamp(newtuple, tupdesc, attnum, new_token);

	if (repeated)
	{
		/* The row repeats the last write accepted (guard_repeat.c). */
		if (old_resource != NULL)
			guard_row_floor(new_resource, oldtuple, rel, attnum, new_token);
	}
	else if (old_resource == NULL && guard_on_conflict_running())
		return guard_insert_or_nothing(rel, newtuple, new_resource, new_token,
									   config->strict, step);
	else if (old_resource == NULL || strcmp(old_resource, new_resource) == 0)
	{
		marks_check(new_resource, new_token, config->strict, step);
		guard_repeat_note(config, new_resource, new_token, declared_gen);
		if (old_resource != NULL)
			guard_row_floor(new_resource, oldtuple, rel, attnum, new_token);
	}
	else
	{
		/*
		 * The row moves from one resource to another: the write must be
		 * allowed on both.  Lock the marks in a fixed order, so that two
		 * rows moving opposite ways cannot deadlock on them.
		 */
		FenceToken	old_step;

		old_token = guard_token(old_resource, statement_sets, stmt_tuple,
								trigger, rel, attnum, &stamp, &old_step);
		if (strcmp(old_resource, new_resource) < 0)
		{
			marks_check(old_resource, old_token, config->strict, old_step);
			marks_check(new_resource, new_token, config->strict, step);
		}
		else
		{
			marks_check(new_resource, new_token, config->strict, step);
			marks_check(old_resource, old_token, config->strict, old_step);
		}
		guard_row_floor(old_resource, oldtuple, rel, attnum, old_token);
	}

	/* Only a partition's row can move to another partition. */
	if (TRIGGER_FIRED_BY_UPDATE(event) && rel->rd_rel->relispartition)
	{
		moving_row.valid = true;
		moving_row.lxid = FencingLocalTransactionId();
		moving_row.subid = GetCurrentSubTransactionId();
		moving_row.relid = RelationGetRelid(rel);
		moving_row.tid = oldtuple->t_self;
		moving_row.token = old_resource && strcmp(old_resource, new_resource) != 0 ?
			old_token : new_token;
	}
	return newtuple;
}

/*
 * A write replicated from a publisher, which fenced it: accept it, and
 * raise this subscriber's marks to the token it carries (marks_sql.c).
 */
static HeapTuple
guard_replicated(TriggerData *trigdata, GuardConfig *config)
{
	TupleDesc	tupdesc = RelationGetDescr(trigdata->tg_relation);
	HeapTuple	newtuple;
	bool		isnull;
	Datum		token;
	const char *resource;

	if (TRIGGER_FIRED_BY_DELETE(trigdata->tg_event))
		return trigdata->tg_trigtuple;
	newtuple = TRIGGER_FIRED_BY_UPDATE(trigdata->tg_event) ?
		trigdata->tg_newtuple : trigdata->tg_trigtuple;
	token = heap_getattr(newtuple, config->token_attnum, tupdesc, &isnull);
	if (config->nparts == 0 || isnull)
		return newtuple;
	resource = guard_resource(config, trigdata->tg_trigger, newtuple, tupdesc,
							  false);
	replica_raise(config->extnsp, resource, DatumGetFenceToken(token));

	/* A row that moved raised both resources on the publisher. */
	if (TRIGGER_FIRED_BY_UPDATE(trigdata->tg_event))
	{
		const char *old_resource = guard_resource(config, trigdata->tg_trigger,
												  trigdata->tg_trigtuple,
												  tupdesc, false);

		if (strcmp(old_resource, resource) != 0)
			replica_raise(config->extnsp, old_resource, DatumGetFenceToken(token));
	}
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
	stats_row_start(RelationGetRelid(trigdata->tg_relation));

	if (replica_applying())
		return stats_row_accepted(PointerGetDatum(guard_replicated(trigdata, config)));
	if (config->nparts == 0)
		return stats_row_accepted(PointerGetDatum(guard_row_scope(trigdata, config)));
	return stats_row_accepted(PointerGetDatum(guard_resource_scope(trigdata, config)));
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
