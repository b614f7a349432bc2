/*-------------------------------------------------------------------------
 *
 * resource_template.c
 *	  Resource templates: their reading, and the rule naming a row's
 *	  resource, in C for the guard and in SQL for fence_attach().
 *
 * A template is literal text with {column} placeholders; "{{" and "}}"
 * stand for one brace.  A row's resource is the template with each
 * placeholder replaced by its column's text output, except that values
 * that compare equal must name one resource: numeric without trailing
 * zeros (42 and 42.0), character(n) without trailing blanks.
 *
 * The guard applies the rule in C to each row it checks
 * (resource_template_name); fence_attach() applies it in SQL to every row
 * already in a table, to seed their marks (resource_template_sql).  The
 * two must name every row alike, or a seeded mark would guard a resource
 * that no write names: the per-type rule is therefore written twice side
 * by side here, in resource_value_text() and resource_value_sql(), and
 * the regression test resource_template compares them on every type a
 * placeholder accepts.
 *
 * IDENTIFICATION
 *	  src/guard/resource_template.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "core/core.h"
#include "fencing_errcodes.h"
#include "guard/guard.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/numeric.h"
#include "utils/rel.h"

/*
 * resource_template_next
 *		Read the next piece of a resource template at *p into piece and
 *		advance *p past it: a run of literal text, in which "{{" and "}}"
 *		stand for one brace, or a placeholder, "{column}".  At a brace that
 *		is neither, returns which it is and leaves *p there.
 *
 * This is the one reading of templates: the guard's, fence_attach()'s and
 * the DDL checks'.
 */
TemplatePiece
resource_template_next(const char **p, StringInfo piece)
{
	const char *s = *p;
	const char *end;

	resetStringInfo(piece);
	for (;;)
	{
		if ((s[0] == '{' && s[1] == '{') || (s[0] == '}' && s[1] == '}'))
		{
			appendStringInfoChar(piece, *s);
			s += 2;
		}
		else if (*s != '\0' && *s != '{' && *s != '}')
			appendStringInfoChar(piece, *s++);
		else
			break;
	}
	if (piece->len > 0)
	{
		*p = s;
		return TEMPLATE_LITERAL;
	}
	if (*s == '\0')
		return TEMPLATE_END;
	if (*s == '}')
		return TEMPLATE_BAD_BRACE;

	end = strchr(s + 1, '}');
	if (end == NULL || end == s + 1 || memchr(s + 1, '{', end - s - 1) != NULL)
		return TEMPLATE_BAD_PLACEHOLDER;
	appendBinaryStringInfo(piece, s + 1, end - s - 1);
	*p = end + 1;
	return TEMPLATE_COLUMN;
}

/*
 * resource_template_refuse
 *		Report the bad brace resource_template_next() found in template,
 *		that of trigger tgname (NULL for one not created yet).
 */
void
resource_template_refuse(const char *template, const char *tgname,
						 TemplatePiece bad)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 tgname != NULL ?
			 errmsg("invalid resource template \"%s\" for trigger \"%s\"",
					template, tgname) :
			 errmsg("invalid resource template \"%s\"", template),
			 bad == TEMPLATE_BAD_BRACE ?
			 errdetail("A \"}\" outside a placeholder must be doubled.") :
			 errdetail("A placeholder is \"{\", a column name and \"}\"; write \"{{\" for a literal brace.")));
}

/*
 * Append the text of a placeholder's value, of basetype under any domain,
 * to buf: the rule in C.
 */
static void
resource_value_text(StringInfo buf, Oid basetype, FmgrInfo *output,
					Datum value)
{
	char		digits[MAXINT8LEN + 1];

	/* The output functions' own conversions, without a call through fmgr. */
	if (basetype == INT4OID)
		appendBinaryStringInfo(buf, digits, pg_ltoa(DatumGetInt32(value), digits));
	else if (basetype == INT8OID)
		appendBinaryStringInfo(buf, digits, pg_lltoa(DatumGetInt64(value), digits));
	else if (basetype == TEXTOID)
	{
		text	   *t = DatumGetTextPP(value);

		appendBinaryStringInfo(buf, VARDATA_ANY(t), VARSIZE_ANY_EXHDR(t));
	}
	else if (basetype == NUMERICOID)
		appendStringInfoString(buf, numeric_normalize(DatumGetNumeric(value)));
	else if (basetype == BPCHAROID)
	{
		char	   *text = OutputFunctionCall(output, value);
		int			len = strlen(text);

		while (len > 0 && text[len - 1] == ' ')
			len--;
		appendBinaryStringInfo(buf, text, len);
	}
	else
		appendStringInfoString(buf, OutputFunctionCall(output, value));
}

/*
 * Append to expr the SQL expression of the text of column col (quoted),
 * of basetype under any domain: the same rule in SQL.
 */
static void
resource_value_sql(StringInfo expr, Oid basetype, const char *col)
{
	if (basetype == NUMERICOID)
		appendStringInfo(expr, "pg_catalog.format('%%s', pg_catalog.trim_scale(%s))", col);
	else if (basetype == BPCHAROID)
		appendStringInfo(expr, "pg_catalog.rtrim(pg_catalog.format('%%s', %s), ' ')", col);
	else
		appendStringInfo(expr, "pg_catalog.format('%%s', %s)", col);
}

/*
 * resource_template_name
 *		The resource a row belongs to, by the template parsed into parts,
 *		those of trigger tgname.
 *
 * With new_row (a row being written), a value that contains the first
 * character of the literal after its placeholder is refused: in
 * "{a}:{b}", a = 'x:y', b = 'z' and a = 'x', b = 'y:z' would name one
 * resource.  A value without it ends exactly where that literal starts,
 * so names stay unambiguous and none written before changes.  (Two
 * placeholders with no literal between them stay ambiguous: documented.)
 */
const char *
resource_template_name(TemplatePart *parts, int nparts, HeapTuple tuple,
					   TupleDesc tupdesc, const char *tgname, bool new_row)
{
	StringInfoData buf;
	int			start;
	int			i;

	/*
	 * A template without placeholders names one resource for every row,
	 * its length checked when the template was parsed.
	 */
	if (nparts == 1 && parts[0].literal != NULL)
		return parts[0].literal;

	initStringInfo(&buf);
	for (i = 0; i < nparts; i++)
	{
		TemplatePart *part = &parts[i];
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
							tgname),
					 errdetail("A fenced row must name its resource.")));
		start = buf.len;
		resource_value_text(&buf, part->basetype,
							&part->output, value);
		if (new_row && i + 1 < nparts && parts[i + 1].literal != NULL &&
			memchr(buf.data + start, parts[i + 1].literal[0],
				   buf.len - start) != NULL)
			ereport(ERROR,
					(errcode(ERRCODE_FENCING_AMBIGUOUS_NAME),
					 errmsg("value of column \"%s\" contains \"%c\", which separates it from the rest of the resource name of trigger \"%s\"",
							NameStr(TupleDescAttr(tupdesc, part->attnum - 1)->attname),
							parts[i + 1].literal[0], tgname),
					 errdetail("Rows with different values would name one resource, as (\"x:y\", \"z\") and (\"x\", \"y:z\") in \"{a}:{b}\"."),
					 errhint("Use a separator the column's values never contain, or put the column last in the template.")));
	}
	resource_name_check(buf.data, buf.len);
	return buf.data;
}

/*
 * resource_template_sql
 *		The SQL expression naming a row's resource by template, over the
 *		columns of rel, and in *notnull the condition that every
 *		placeholder column is set.  column_type finds each placeholder's
 *		column.
 */
char *
resource_template_sql(Relation rel, const char *template,
					  TemplateColumnType column_type, StringInfo notnull)
{
	StringInfoData expr;
	StringInfoData piece;
	const char *p = template;
	TemplatePiece kind;

	initStringInfo(&expr);
	initStringInfo(&piece);
	appendStringInfoString(&expr, "''");
	while ((kind = resource_template_next(&p, &piece)) != TEMPLATE_END)
	{
		if (kind == TEMPLATE_LITERAL)
			appendStringInfo(&expr, " OPERATOR(pg_catalog.||) %s",
							 quote_literal_cstr(piece.data));
		else if (kind == TEMPLATE_COLUMN)
		{
			Oid			basetype = getBaseType(column_type(rel, piece.data));
			const char *col = quote_identifier(piece.data);

			appendStringInfoString(&expr, " OPERATOR(pg_catalog.||) ");
			resource_value_sql(&expr, basetype, col);
			appendStringInfo(notnull, " AND %s IS NOT NULL", col);
		}
		else
			resource_template_refuse(template, NULL, kind);
	}
	return expr.data;
}
