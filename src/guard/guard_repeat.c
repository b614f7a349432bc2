/*-------------------------------------------------------------------------
 *
 * guard_repeat.c
 *	  Rows that repeat the last write a fence_guard() trigger accepted:
 *	  one resource, one token, row after row.
 *
 * A trigger whose template has no placeholders names one resource for
 * every row, and a bulk INSERT or UPDATE through it writes that resource
 * with one token, row after row.  Each row would look the declaration up
 * (declared.c) and the mark (marks_check), and find what the row before
 * found.  Instead, the trigger's configuration keeps the last write it
 * accepted, and a row with the same token, in the same transaction, with
 * no declaration and nothing this transaction holds of any mark changed
 * since (counted by declared_generation and marks_check_repeats), is
 * accepted as that one was; a declared token is still stamped into the
 * row, and a floor recorded meanwhile by another session's acquisition
 * still rejects it.  Rows of INSERT ... ON CONFLICT are always checked
 * (guard_conflict.c).
 *
 * IDENTIFICATION
 *	  src/guard/guard_repeat.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "guard/guard.h"
#include "marks/marks.h"

/* Whether config names one resource, the same for every row. */
static bool
guard_one_resource(GuardConfig *config)
{
	return config->nparts == 1 && config->parts[0].literal != NULL;
}

/*
 * guard_repeat_note
 *		Keep the write of token to resource that marks_check has just
 *		accepted through config, the declarations being as they were at
 *		declared_gen, taken before the token was chosen.
 */
void
guard_repeat_note(GuardConfig *config, const char *resource, FenceToken token,
				  uint64 declared_gen)
{
	FenceToken	declared;

	if (!guard_one_resource(config))
		return;
	marks_check_memo(&config->repeat, token, config->strict);
	config->repeat_declared_generation = declared_gen;
	config->repeat_declared = declared_lookup(resource, &declared);
}

/*
 * guard_repeats
 *		Whether the row newtuple, written to resource through config,
 *		repeats the last write accepted; if so it is accepted, at *token,
 *		with *stamp saying whether the row must be stamped with it, as
 *		guard_token would say.  statement_sets: whether the statement sets
 *		the token column.
 */
bool
guard_repeats(GuardConfig *config, const char *resource, bool statement_sets,
			  HeapTuple newtuple, TupleDesc tupdesc, FenceToken *token,
			  bool *stamp)
{
	FenceToken	repeat = config->repeat.token;
	Datum		value = (Datum) 0;
	bool		isnull = true;

	if (!config->repeat.valid || !guard_one_resource(config) ||
		config->repeat_declared_generation != declared_generation() ||
		guard_on_conflict_running())
		return false;
	if (statement_sets)
		value = heap_getattr(newtuple, config->token_attnum, tupdesc, &isnull);

	/* A declared token overrides the row's; else the row's must repeat. */
	if (config->repeat_declared)
		*stamp = isnull || DatumGetFenceToken(value) != repeat;
	else if (isnull || DatumGetFenceToken(value) != repeat)
		return false;
	else
		*stamp = false;
	*token = repeat;
	return marks_check_repeats(&config->repeat, resource, repeat,
							   config->strict);
}
