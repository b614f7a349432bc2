#!/usr/bin/env bash
# test/scripts/isolation_logical.sh: the isolation specs against a cluster
# with wal_level = logical (doc/guard.md "Logical replication").
#
# Under logical WAL a write of a mark is a delete and an insert of its
# row, so that a subscriber lacking the row still gets it; a transaction
# writes each mark at most twice either way (its first raise and its last,
# at commit).  The specs check that other writers still wait for it and
# see its last raise, with the same expected output as below logical.
#
#   bash test/scripts/isolation_logical.sh
# test/run: pg_regress alone
set -euo pipefail

source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/../lib/harness.sh"
cd "$FENCING_TOP"

harness_start_pg "wal_level = logical"
make -s installcheck REGRESS=
