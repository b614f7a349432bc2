/*-------------------------------------------------------------------------
 *
 * resource_template.h
 *	  Resource templates: their reading, and the rule naming a row's
 *	  resource, in C for the guard and in SQL for fence_attach().
 *
 * IDENTIFICATION
 *	  src/resource_template.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef RESOURCE_TEMPLATE_H
#define RESOURCE_TEMPLATE_H

#include "access/htup.h"
#include "access/tupdesc.h"
#include "core/pg_compat.h"
#include "fmgr.h"
#include "lib/stringinfo.h"
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
										  const char *tgname);
extern char *resource_template_sql(Relation rel, const char *template,
								   TemplateColumnType column_type,
								   StringInfo notnull);

#endif							/* RESOURCE_TEMPLATE_H */
