/*-------------------------------------------------------------------------
 *
 * guard.h
 *	  The public face of the guard layer: resource templates (the rule
 *	  naming a row's resource, in C for the guard and in SQL for
 *	  fence_attach()), the parsed arguments of a fence_guard() trigger,
 *	  cached per trigger, the tokens a session or transaction declared,
 *	  fencing.allow_session_state, and whether a MERGE is running.  The
 *	  guard uses core, marks and stats' counters only.
 *
 * IDENTIFICATION
 *	  src/guard/guard.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef FENCING_GUARD_GUARD_H
#define FENCING_GUARD_GUARD_H

#include "access/htup.h"
#include "access/tupdesc.h"
#include "commands/trigger.h"
#include "core/core.h"
#include "core/pg_compat.h"
#include "fmgr.h"
#include "lib/stringinfo.h"
#include "marks/marks.h"
#include "utils/rel.h"
#include "utils/relcache.h"

/* One piece of a resource template: literal text, or a column's value. */
typedef struct TemplatePart
{
	char	   *literal;		/* NULL for a column */
	AttrNumber	attnum;
	Oid			basetype;		/* the column's type, under any domain */
	FmgrInfo	output;			/* the column type's output function */
} TemplatePart;

/* What resource_template_next() read from a resource template. */
typedef enum TemplatePiece
{
	TEMPLATE_END,				/* the end of the template */
	TEMPLATE_LITERAL,			/* literal text, a doubled brace read as one */
	TEMPLATE_COLUMN,			/* a placeholder: its column's name */
	TEMPLATE_BAD_BRACE,			/* a "}" outside a placeholder, not doubled */
	TEMPLATE_BAD_PLACEHOLDER	/* a "{" without a column name and "}" */
} TemplatePiece;

/*
 * The type of a placeholder's column, for resource_template_sql(); it
 * refuses a column the template must not name.
 */
typedef Oid (*TemplateColumnType) (Relation rel, const char *name);

extern TemplatePiece resource_template_next(const char **p, StringInfo piece);
pg_noreturn extern void resource_template_refuse(const char *template,
												 const char *tgname,
												 TemplatePiece bad);
extern const char *resource_template_name(TemplatePart *parts, int nparts,
										  HeapTuple tuple,
										  TupleDesc tupdesc,
										  const char *tgname, bool new_row);
extern char *resource_template_sql(Relation rel, const char *template,
								   TemplateColumnType column_type,
								   StringInfo notnull);

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
	Oid		   *ancestors;		/* their invalidations make it stale too */
	int			nancestors;
	MemoryContext cxt;			/* holds parts and ancestors */
	bool		valid;			/* false once DDL may have changed it */

	/*
	 * With a template without placeholders: the last write accepted, for
	 * fence_guard to accept the rows that repeat it without looking the
	 * declaration and the mark up again (guard_repeats).
	 */
	MarksRepeat repeat;
	uint64		repeat_declared_generation;
	bool		repeat_declared;	/* the token was declared, not the row's */
} GuardConfig;

extern void guard_config_init(void);
extern void guard_config_at_xact_end(void);
extern GuardConfig *guard_config(FunctionCallInfo fcinfo, Trigger *trigger,
								 Relation rel);
extern void guard_refuse_shape(Trigger *trigger, Relation rel);

extern uint64 declared_generation(void);
extern void declared_at_xact_end(void);
extern void declared_pre_prepare(void);
extern void declared_discard_all(void);
extern bool declared_get(const char *resource, bool is_local, FenceToken *token);
extern bool declared_lookup(const char *resource, FenceToken *token);
extern void declared_set(const char *resource, FenceToken token, bool is_local);
extern void declared_clear(const char *resource, bool is_local);
extern void declared_use(const char *resource, bool has_token,
						 FenceToken token, bool is_local);
extern char *declared_use_args(FunctionCallInfo fcinfo, bool *has_token,
							   FenceToken *token, bool *is_local);

extern void session_state_init(void);
extern void session_state_check(const char *form);

/* MERGE statements running (fence_guard.c's executor hooks) */
extern void guard_merges_init(void);
extern void guard_merges_at_xact_end(void);
extern bool guard_in_merge(void);

/* INSERT ... ON CONFLICT, fencing.max_token_step (guard_conflict.c) */
extern void guard_conflict_init(void);
extern void guard_conflict_at_xact_end(void);
extern FenceToken guard_max_token_step(void);
extern bool guard_on_conflict_running(void);
extern bool guard_row_conflicts(Relation rel, HeapTuple tuple,
								ItemPointer conflict);
extern void guard_conflict_pass(Relation rel, ItemPointer conflict,
								const char *resource, FenceToken token,
								bool strict, FenceToken step);

/* rows repeating the last write accepted (guard_repeat.c) */
extern void guard_repeat_note(GuardConfig *config, const char *resource,
							  FenceToken token, uint64 declared_gen);
extern bool guard_repeats(GuardConfig *config, const char *resource,
						  bool statement_sets, HeapTuple newtuple,
						  TupleDesc tupdesc, FenceToken *token, bool *stamp);

/* view DEFAULTs over a token column (guard_views.c) */
extern void guard_views_init(void);

#endif							/* FENCING_GUARD_GUARD_H */
