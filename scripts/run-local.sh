#!/usr/bin/env bash
# `make run`: a local cluster on loopback — 1 scheduler, 2 servers,
# 2 workers — driven by ps-bench in push-pull mode over a few sizes.
# ps-bench starts and stops every process itself.
set -euo pipefail
BUILD=${BUILD:-build}
exec "$BUILD/bin/ps-bench" --servers 2 --workers 2 --mode pushpull \
	--size "${PS_RUN_SIZES:-4K,64K,1M,16M}" --seconds 1 --runs 3 "$@"
