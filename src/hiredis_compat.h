/*-------------------------------------------------------------------------
 *
 * hiredis_compat.h
 *	  What the extension needs of the hiredis version it is built against,
 *	  in one place: 0.14 (Debian 12) and 1.x (Debian 13 and later).
 *
 * IDENTIFICATION
 *	  src/hiredis_compat.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef FENCING_HIREDIS_COMPAT_H
#define FENCING_HIREDIS_COMPAT_H

#include <hiredis/hiredis.h>

/*
 * hiredis 1.0 gave the reader's createArray() callback the element count
 * as a size_t (it was an int: arrays of more than 2^31 elements), along
 * with RESP3.
 */
#if HIREDIS_MAJOR >= 1
typedef size_t RedisArrayCount;
#else
typedef int RedisArrayCount;
#endif

#endif							/* FENCING_HIREDIS_COMPAT_H */
