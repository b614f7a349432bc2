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

typedef struct ResourceMap
{
	HTAB	   *htab;
	MemoryContext cxt;			/* holds the table and the names */
	Size		entrysize;
} ResourceMap;

extern ResourceMap *resource_map_create(const char *name, Size entrysize,
										MemoryContext cxt);
extern void *resource_map_lookup(ResourceMap *map, const char *resource);
extern void *resource_map_enter(ResourceMap *map, const char *resource,
								bool *found);
extern void resource_map_remove(ResourceMap *map, const char *resource);
extern void resource_map_destroy(ResourceMap *map);

#endif							/* RESOURCE_MAP_H */
