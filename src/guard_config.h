/*-------------------------------------------------------------------------
 *
 * guard_config.h
 *	  The parsed arguments of a fence_guard() trigger, cached per trigger.
 *
 * IDENTIFICATION
 *	  src/guard_config.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef GUARD_CONFIG_H
#define GUARD_CONFIG_H

#include "commands/trigger.h"
#include "fmgr.h"
#include "lib/stringinfo.h"
#include "pg_compat.h"
#include "utils/rel.h"

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

/* What guard_template_next() read from a resource template. */
typedef enum TemplatePiece
{
	TEMPLATE_END,				/* the end of the template */
	TEMPLATE_LITERAL,			/* literal text, a doubled brace read as one */
	TEMPLATE_COLUMN,			/* a placeholder: its column's name */
	TEMPLATE_BAD_BRACE,			/* a "}" outside a placeholder, not doubled */
	TEMPLATE_BAD_PLACEHOLDER	/* a "{" without a column name and "}" */
} TemplatePiece;

extern void guard_config_init(void);
extern void guard_config_at_xact_end(void);
extern GuardConfig *guard_config(FunctionCallInfo fcinfo, Trigger *trigger,
								 Relation rel);
extern TemplatePiece guard_template_next(const char **p, StringInfo piece);
pg_noreturn extern void guard_template_refuse(const char *template,
											  const char *tgname,
											  TemplatePiece bad);

#endif							/* GUARD_CONFIG_H */
