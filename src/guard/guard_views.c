/*-------------------------------------------------------------------------
 *
 * guard_views.c
 *	  A DEFAULT on a view's column over a guard's token column is refused
 *	  when a statement would take it.
 *
 * The rewriter fills a view's defaults into an INSERT (and an UPDATE ...
 * SET tok = DEFAULT) before the table's trigger runs, which then cannot
 * tell the default from a token the statement wrote: a tokenless,
 * undeclared write would be accepted at the default's token, and raise the
 * mark to it.  The guard refuses a default on the table or its ancestors
 * itself (guard_config.c); a view's it cannot see.  A statement can: at
 * parse analysis the target list still says which columns the statement
 * leaves to their defaults, and the view's query which table column each
 * stands for.  A view over a view takes the defaults of each, so the
 * chain of automatically updatable views is followed down to the table
 * (a view that is not one writes through triggers or rules of its own).
 *
 * Only statements whose target is a view are looked at; the library sees
 * them once loaded (session_preload_libraries, or an earlier fenced
 * statement in the session).
 *
 * IDENTIFICATION
 *	  src/guard/guard_views.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/table.h"
#include "catalog/pg_class.h"
#include "commands/extension.h"
#include "commands/trigger.h"
#include "core/core.h"
#include "fencing_errcodes.h"
#include "guard/guard.h"
#include "nodes/nodeFuncs.h"
#include "parser/analyze.h"
#include "parser/parsetree.h"
#include "rewrite/rewriteHandler.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"

static post_parse_analyze_hook_type prev_post_parse_analyze = NULL;

/* Whether attnum of rel is the token column of one of its enabled guards. */
static bool
views_is_token_column(Relation rel, AttrNumber attnum, Oid guard)
{
	const char *name = NameStr(TupleDescAttr(RelationGetDescr(rel), attnum - 1)->attname);
	int			i;

	for (i = 0; rel->trigdesc != NULL && i < rel->trigdesc->numtriggers; i++)
	{
		Trigger    *trigger = &rel->trigdesc->triggers[i];

		if (trigger->tgfoid == guard && trigger->tgenabled != TRIGGER_DISABLED &&
			trigger->tgnargs >= 1 && strcmp(trigger->tgargs[0], name) == 0)
			return true;
	}
	return false;
}

/*
 * Refuse the default of column attnum of view viewid, when some view down
 * the chain from it has a default on the column and the column is, at the
 * bottom, a guard's token column.  A view that is not automatically
 * updatable, or a column of it that is not a plain column of its base
 * relation, ends the chain.
 */
static void
views_check_default(Oid viewid, AttrNumber attnum, Oid guard)
{
	Oid			relid = viewid;
	const char *defaulted = NULL;

	for (;;)
	{
		Relation	rel = table_open(relid, AccessShareLock);
		Query	   *viewquery;
		TargetEntry *tle;
		RangeTblEntry *base;

		if (rel->rd_rel->relkind != RELKIND_VIEW)
		{
			bool		token = views_is_token_column(rel, attnum, guard);

			table_close(rel, AccessShareLock);
			if (token && defaulted != NULL)
				ereport(ERROR,
						(errcode(ERRCODE_FENCING_VIEW_DEFAULT),
						 errmsg("the default of column \"%s\" of view \"%s\" would stand in for a fence token",
								get_attname(viewid, attnum, false), defaulted),
						 errdetail("The column is token column \"%s\" of guarded table \"%s\", and the guard cannot tell a default from a token the statement wrote.",
								   get_attname(relid, attnum, false), get_rel_name(relid)),
						 errhint("Name the token column in the statement, or drop the view's default: ALTER VIEW %s ALTER COLUMN %s DROP DEFAULT.",
								 defaulted, get_attname(viewid, attnum, false))));
			return;
		}
		if (defaulted == NULL && rel->rd_att->constr != NULL &&
			TupleDescAttr(rel->rd_att, attnum - 1)->atthasdef)
			defaulted = pstrdup(RelationGetRelationName(rel));
		viewquery = get_view_query(rel);
		tle = get_tle_by_resno(viewquery->targetList, attnum);
		if (tle == NULL || !IsA(tle->expr, Var) ||
			((Var *) tle->expr)->varlevelsup != 0 ||
			view_query_is_auto_updatable(viewquery, false) != NULL)
		{
			table_close(rel, AccessShareLock);
			return;
		}
		base = rt_fetch(((Var *) tle->expr)->varno, viewquery->rtable);
		attnum = ((Var *) tle->expr)->varattno;
		table_close(rel, AccessShareLock);
		if (base->rtekind != RTE_RELATION || attnum <= 0)
			return;
		relid = base->relid;
	}
}

/*
 * Whether the statement leaves column attnum of its target to the
 * default: an INSERT that does not name it, or names it with DEFAULT (in
 * a VALUES list, any row's), an UPDATE that sets it to DEFAULT.
 */
static bool
views_takes_default(Query *query, AttrNumber attnum)
{
	ListCell   *lc;

	foreach(lc, query->targetList)
	{
		TargetEntry *tle = lfirst_node(TargetEntry, lc);

		if (tle->resjunk || tle->resno != attnum)
			continue;
		if (IsA(tle->expr, SetToDefault))
			return true;
		if (IsA(tle->expr, Var) && query->commandType == CMD_INSERT)
		{
			Var		   *var = (Var *) tle->expr;
			RangeTblEntry *rte = rt_fetch(var->varno, query->rtable);
			ListCell   *row;

			if (var->varlevelsup != 0 || rte->rtekind != RTE_VALUES)
				return false;
			foreach(row, rte->values_lists)
			{
				Node	   *value = list_nth((List *) lfirst(row),
											 var->varattno - 1);

				if (IsA(value, SetToDefault))
					return true;
			}
		}
		return false;
	}
	return query->commandType == CMD_INSERT;
}

/* Check a statement, and the data-modifying WITH queries in it. */
static void
views_check_query(Query *query, Oid *guard)
{
	RangeTblEntry *target;
	Relation	view;
	AttrNumber	attnum;
	ListCell   *lc;

	foreach(lc, query->cteList)
	{
		CommonTableExpr *cte = lfirst_node(CommonTableExpr, lc);

		if (IsA(cte->ctequery, Query))
			views_check_query((Query *) cte->ctequery, guard);
	}
	if ((query->commandType != CMD_INSERT && query->commandType != CMD_UPDATE) ||
		query->resultRelation <= 0)
		return;
	target = rt_fetch(query->resultRelation, query->rtable);
	if (target->relkind != RELKIND_VIEW)
		return;
	if (!OidIsValid(*guard))
	{
		/* not in a database without the extension (or while it is made) */
		if (!OidIsValid(get_extension_oid("fencing", true)) ||
			creating_extension)
			return;
		*guard = extension_func(extension_schema(), "fence_guard", 0, NULL);
	}
	view = table_open(target->relid, AccessShareLock);
	for (attnum = 1; attnum <= RelationGetNumberOfAttributes(view); attnum++)
	{
		if (TupleDescAttr(RelationGetDescr(view), attnum - 1)->attisdropped ||
			!views_takes_default(query, attnum))
			continue;
		views_check_default(target->relid, attnum, *guard);
	}
	table_close(view, AccessShareLock);
}

static void
views_post_parse_analyze(ParseState *pstate, Query *query, JumbleState *jstate)
{
	Oid			guard = InvalidOid;

	if (prev_post_parse_analyze)
		prev_post_parse_analyze(pstate, query, jstate);
	views_check_query(query, &guard);
}

/*
 * guard_views_init
 *		Install the parse analysis hook; called from _PG_init.
 */
void
guard_views_init(void)
{
	prev_post_parse_analyze = post_parse_analyze_hook;
	post_parse_analyze_hook = views_post_parse_analyze;
}
