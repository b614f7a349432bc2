/*-------------------------------------------------------------------------
 *
 * extension.h
 *	  The one lookup of the extension's own objects: its schema, its
 *	  tables and its functions.
 *
 * IDENTIFICATION
 *	  src/extension.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef FENCING_EXTENSION_H
#define FENCING_EXTENSION_H

#include "fmgr.h"

extern Oid	extension_schema(void);
extern Oid	extension_schema_of_call(FunctionCallInfo fcinfo);
extern Oid	extension_table(Oid extnsp, const char *name);
extern Oid	extension_func(Oid extnsp, const char *name, int nargs,
						   Oid *argtypes);
extern Oid	extension_advance_func(Oid extnsp);

#endif							/* FENCING_EXTENSION_H */
