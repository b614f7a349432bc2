/*-------------------------------------------------------------------------
 *
 * resource_map.h
 *	  Hash tables keyed by resource name, of any length.
 *
 * dynahash's string keys are fixed-size and silently truncated, which would
 * make two long resource names that share a prefix the same resource.
 * These maps hash and compare the whole name.
 *
 * IDENTIFICATION
 *	  src/resource_map.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef RESOURCE_MAP_H
#define RESOURCE_MAP_H

#include "utils/hsearch.h"

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

#endif							/* RESOURCE_MAP_H */
