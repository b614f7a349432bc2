/*-------------------------------------------------------------------------
 *
 * resource.c
 *	  Resource names: the one limit on them, and hash tables keyed by
 *	  them, of any length.
 *
 * Maps.  The dynahash key is a pointer to the name; hashing and matching look
 * through it.  What is entered is a copy of the caller's string in the
 * map's own memory context, freed with the entry.
 *
 * The limit.  Every function that takes a resource name, and the guard for the names
 * its template builds, refuses a name over FENCING_RESOURCE_MAX_BYTES
 * before it writes or sends anything.  fence_mark and fence_forget do not:
 * marks written by 1.0, which had no limit, stay readable and forgettable.
 *
 * IDENTIFICATION
 *	  src/core/resource.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/hashfn.h"
#include "core/core.h"

struct ResourceMap
{
	HTAB	   *htab;
	MemoryContext cxt;			/* holds the table and the names */
	Size		entrysize;
};

static uint32
resource_map_hash(const void *key, Size keysize)
{
	const char *resource = *(char *const *) key;

	return hash_bytes((const unsigned char *) resource, strlen(resource));
}

static int
resource_map_match(const void *key1, const void *key2, Size keysize)
{
	return strcmp(*(char *const *) key1, *(char *const *) key2);
}

/*
 * resource_map_create
 *		Make an empty map whose entries are entrysize bytes, starting with
 *		a ResourceMapKey, allocated in cxt.
 */
ResourceMap *
resource_map_create(const char *name, Size entrysize, MemoryContext cxt)
{
	ResourceMap *map = MemoryContextAlloc(cxt, sizeof(ResourceMap));
	HASHCTL		ctl;

	Assert(entrysize >= sizeof(ResourceMapKey));
	ctl.keysize = sizeof(char *);
	ctl.entrysize = entrysize;
	ctl.hash = resource_map_hash;
	ctl.match = resource_map_match;
	ctl.hcxt = cxt;
	map->htab = hash_create(name, 16, &ctl,
							HASH_ELEM | HASH_FUNCTION | HASH_COMPARE | HASH_CONTEXT);
	map->cxt = cxt;
	map->entrysize = entrysize;
	return map;
}

/*
 * resource_map_lookup
 *		The entry for resource, or NULL.
 */
void *
resource_map_lookup(ResourceMap *map, const char *resource)
{
	return hash_search(map->htab, &resource, HASH_FIND, NULL);
}

/*
 * resource_map_enter
 *		The entry for resource, made if missing; *found says which.  A new
 *		entry has its key set and the rest of it zeroed.
 */
void *
resource_map_enter(ResourceMap *map, const char *resource, bool *found)
{
	ResourceMapKey *entry;
	char	   *copy;

	entry = hash_search(map->htab, &resource, HASH_FIND, NULL);
	*found = entry != NULL;
	if (*found)
		return entry;

	/*
	 * Copy the name before entering it, so that running out of memory
	 * cannot leave an entry pointing at the caller's string.
	 */
	copy = MemoryContextStrdup(map->cxt, resource);
	entry = hash_search(map->htab, &copy, HASH_ENTER, NULL);
	memset(((char *) entry) + sizeof(ResourceMapKey), 0,
		   map->entrysize - sizeof(ResourceMapKey));
	return entry;
}

/*
 * resource_map_remove
 *		Drop the entry for resource, if any, and its copy of the name.
 */
void
resource_map_remove(ResourceMap *map, const char *resource)
{
	ResourceMapKey *entry;

	entry = hash_search(map->htab, &resource, HASH_FIND, NULL);
	if (entry != NULL)
	{
		char	   *copy = entry->resource;

		hash_search(map->htab, &resource, HASH_REMOVE, NULL);
		pfree(copy);
	}
}

/*
 * resource_map_destroy
 *		Free the map and every name in it.
 */
void
resource_map_destroy(ResourceMap *map)
{
	HASH_SEQ_STATUS status;
	ResourceMapKey *entry;

	hash_seq_init(&status, map->htab);
	while ((entry = hash_seq_search(&status)) != NULL)
		pfree(entry->resource);
	hash_destroy(map->htab);
	pfree(map);
}

/*
 * resource_map_count
 *		The number of entries in the map.
 */
long
resource_map_count(ResourceMap *map)
{
	return hash_get_num_entries(map->htab);
}

/*
 * resource_map_context
 *		The memory context that holds the map, for memory its entries point
 *		to and that must live as long.
 */
MemoryContext
resource_map_context(ResourceMap *map)
{
	return map->cxt;
}

/*
 * resource_map_iterate
 *		Start a walk over the map's entries.  The walk may remove the entry
 *		it is at, and no other; it must run to the end, when
 *		resource_map_next returns NULL.
 */
void
resource_map_iterate(ResourceMap *map, ResourceMapIterator *iter)
{
	hash_seq_init(&iter->status, map->htab);
}

/*
 * resource_map_next
 *		The next entry of the walk, or NULL at its end.
 */
void *
resource_map_next(ResourceMapIterator *iter)
{
	return hash_seq_search(&iter->status);
}


/*
 * resource_name_check
 *		Refuse a name over the limit.
 */
void
resource_name_check(const char *name, size_t len)
{
	if (len > FENCING_RESOURCE_MAX_BYTES)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("resource name is too long"),
				 errdetail("The name is %zu bytes long; the limit is %d bytes.",
						   len, FENCING_RESOURCE_MAX_BYTES),
				 errhint("Name the resource by a shorter key, such as a hash of the long one.")));
}
