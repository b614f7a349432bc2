/*-------------------------------------------------------------------------
 *
 * fencing.h
 *	  Module-wide state of the fencing extension, kept by fencing.c.
 *
 * IDENTIFICATION
 *	  src/fencing.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef FENCING_H
#define FENCING_H

extern bool fencing_in_merge(void);

#endif							/* FENCING_H */
