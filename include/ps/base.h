/* SPDX-License-Identifier: MIT */
/*
 * ps-lite's basic names over psched (docs/pslite.md): the key type, the
 * largest key and the node-group ids that Postoffice, SimpleApp and
 * barriers take.
 */
#ifndef PS_BASE_H_
#define PS_BASE_H_

#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "ps/internal/utils.h"

namespace ps
{

/* psched keys are 64 bits wide; USE_KEY32 is not supported. */
using Key = uint64_t;
static const Key kMaxKey = std::numeric_limits<Key>::max();

/* Node groups: the same bits as PSCHED_GROUP_SCHEDULER, _SERVERS and
 * _WORKERS, and ps-lite's node ids (a sum of groups names their union). */
static const int kScheduler = 1;
static const int kServerGroup = 2;
static const int kWorkerGroup = 4;

} // namespace ps

#endif
