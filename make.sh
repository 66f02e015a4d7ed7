#!/bin/sh
# The set-up entry point for a fresh Debian 12 machine, even one without
# make: install the Debian packages psched needs (make among them; apt-get,
# with sudo when not root), then run `make "$@"`.
#   sh make.sh run    local cluster on loopback, ps-bench prints throughput
#   sh make.sh test   the whole test suite
set -eu
cd "$(dirname "$0")"
bash scripts/install-deps.sh
# As many build jobs as CPUs (tests/run.sh runs as many tests at once).
exec make -j"$(nproc 2>/dev/null || echo 2)" "$@"
