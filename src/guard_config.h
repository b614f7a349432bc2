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
#include "resource_template.h"
#include "pg_compat.h"
#include "utils/rel.h"

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
} GuardConfig;

extern void guard_config_init(void);
extern void guard_config_at_xact_end(void);
extern GuardConfig *guard_config(FunctionCallInfo fcinfo, Trigger *trigger,
								 Relation rel);
extern void guard_refuse_shape(Trigger *trigger, Relation rel);

#endif							/* GUARD_CONFIG_H */
