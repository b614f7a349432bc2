/*-------------------------------------------------------------------------
 *
 * core.h
 *	  What every layer of fencing uses: the fence_token type (a 64-bit,
 *	  non-negative, by-value integer), the one lookup of the extension's
 *	  own objects (its schema, tables and functions), the one limit on
 *	  resource names, checked at every entry point, and hash tables keyed
 *	  by resource name, of any length.
 *
 * Core includes nothing of fencing but its compatibility headers: every
 * other layer builds on it (doc/internals.md).
 *
 * Resource maps: dynahash's string keys are fixed-size and silently truncated, which would
 * make two long resource names that share a prefix the same resource.
 * These maps hash and compare the whole name.
 *
 * IDENTIFICATION
 *	  src/core/core.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef FENCING_CORE_CORE_H
#define FENCING_CORE_CORE_H

#include "core/token_parse.h"
#include "fmgr.h"
#include "utils/hsearch.h"

typedef int64 FenceToken;

#define DatumGetFenceToken(X)		((FenceToken) DatumGetInt64(X))
#define FenceTokenGetDatum(X)		Int64GetDatum((int64) (X))
#define PG_GETARG_FENCE_TOKEN(n)	DatumGetFenceToken(PG_GETARG_DATUM(n))
#define PG_RETURN_FENCE_TOKEN(x)	return FenceTokenGetDatum(x)

/* Room for the decimal text of any token, with its terminating NUL. */
#define FENCE_TOKEN_TEXT_LEN		21

extern char *fence_token_to_cstring(FenceToken token, char *buf);
extern bool fence_token_from_cstring(const char *str, FenceToken *token);
extern Oid	fence_token_type(Oid extnsp);

extern Oid	extension_schema(void);
extern Oid	extension_schema_of_call(FunctionCallInfo fcinfo);
extern Oid	extension_table(Oid extnsp, const char *name);
extern Oid	extension_func(Oid extnsp, const char *name, int nargs,
						   Oid *argtypes);
extern Oid	extension_advance_func(Oid extnsp);

/*
 * The longest resource name, in bytes.  A mark's key must fit a btree
 * index tuple (about 2,700 bytes on 8 kB pages) whatever its content,
 * since text that does not compress is stored as it is; 2,000 leaves room
 * for the tuple and varlena headers, and is far above any name a lock
 * service uses.
 */
#define FENCING_RESOURCE_MAX_BYTES 2000

extern void resource_name_check(const char *name, size_t len);

/* Every entry type of a resource map starts with this. */
typedef struct ResourceMapKey
{
	char	   *resource;		/* owned by the map's memory context */
} ResourceMapKey;

typedef struct ResourceMap ResourceMap;

/* A walk over a map's entries, in no particular order. */
typedef struct ResourceMapIterator
{
	HASH_SEQ_STATUS status;
} ResourceMapIterator;

extern ResourceMap *resource_map_create(const char *name, Size entrysize,
										MemoryContext cxt);
extern void *resource_map_lookup(ResourceMap *map, const char *resource);
extern void *resource_map_enter(ResourceMap *map, const char *resource,
								bool *found);
extern void resource_map_remove(ResourceMap *map, const char *resource);
extern void resource_map_destroy(ResourceMap *map);
extern long resource_map_count(ResourceMap *map);
extern MemoryContext resource_map_context(ResourceMap *map);
extern void resource_map_iterate(ResourceMap *map, ResourceMapIterator *iter);
extern void *resource_map_next(ResourceMapIterator *iter);

#endif							/* FENCING_CORE_CORE_H */
