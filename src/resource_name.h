/*-------------------------------------------------------------------------
 *
 * resource_name.h
 *	  The one limit on resource names, checked at every entry point.
 *
 * IDENTIFICATION
 *	  src/resource_name.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef RESOURCE_NAME_H
#define RESOURCE_NAME_H

/*
 * The longest resource name, in bytes.  A mark's key must fit a btree
 * index tuple (about 2,700 bytes on 8 kB pages) whatever its content,
 * since text that does not compress is stored as it is; 2,000 leaves room
 * for the tuple and varlena headers, and is far above any name a lock
 * service uses.
 */
#define FENCING_RESOURCE_MAX_BYTES 2000

extern void resource_name_check(const char *name, size_t len);

#endif							/* RESOURCE_NAME_H */
