/*-------------------------------------------------------------------------
 *
 * lease_renewer.h
 *	  The background worker that renews leases while their owners work.
 *
 * IDENTIFICATION
 *	  src/lease_renewer.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef LEASE_RENEWER_H
#define LEASE_RENEWER_H

extern void lease_renewer_register(void);

#endif							/* LEASE_RENEWER_H */
