#!/usr/bin/env bash
# test/scripts/isolation_logical.sh: the isolation specs against a cluster
# with wal_level = logical (doc/guard.md "Logical replication").
#
# Under logical WAL a raise is never made in place, and each raise is a
# delete and an insert of the mark's row, so that a subscriber lacking the
# row still gets it.  A transaction raising one mark many times then
# leaves one version per raise, each under an index entry of its own; the
# specs check that other writers still wait for it, see its last raise,
# and are rejected at once behind a newer token it is writing.  The only
# expected difference is that raises are not in place
# (guard_raise_in_place_1.out).
#
#   bash test/scripts/isolation_logical.sh
# test/run: pg_regress alone
set -euo pipefail

source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/../lib/harness.sh"
cd "$FENCING_TOP"

harness_start_pg "wal_level = logical"
make -s installcheck REGRESS=
