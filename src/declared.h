/*-------------------------------------------------------------------------
 *
 * declared.h
 *	  Tokens that a session or transaction declared for a resource.
 *
 * IDENTIFICATION
 *	  src/declared.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef DECLARED_H
#define DECLARED_H

#include "core/core.h"

extern void declared_at_xact_end(void);
extern void declared_pre_prepare(void);
extern void declared_discard_all(void);
extern bool declared_get(const char *resource, bool is_local, FenceToken *token);
extern bool declared_lookup(const char *resource, FenceToken *token);
extern void declared_set(const char *resource, FenceToken token, bool is_local);
extern void declared_clear(const char *resource, bool is_local);

#endif							/* DECLARED_H */
