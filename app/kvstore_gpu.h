/* SPDX-License-Identifier: MIT */
/*
 * The C KVStore's calls shared by app/kvstore.c and the device (CUDA)
 * variants in app/kvstore_gpu.c.
 */
#ifndef PSCHED_APP_KVSTORE_GPU_H
#define PSCHED_APP_KVSTORE_GPU_H

#include "psched/kvstore.h"

enum kvstore_call { CALL_PUSH = 0, CALL_PULL = 1, CALL_PUSHPULL = 2 };

/* kvstore.c: check and issue a call; @device -1 for host buffers, else
 * the CUDA device the buffers are on. */
int psd_kvstore_call(struct psched_kvstore *kv, enum kvstore_call call,
		     const uint64_t *keys, size_t nkeys,
		     const void *const *vals, void *const *outs,
		     const uint64_t *lens, enum psched_dtype dtype, int device,
		     int priority);
/* kvstore_gpu.c: the node's device request for @call. */
int psd_kvstore_issue_device(struct psched_node *node, enum kvstore_call call,
			     const uint64_t *keys, size_t nkeys,
			     const void *const *vals, void *const *outs,
			     const uint64_t *sizes, enum psched_dtype dtype,
			     int device, int prio, uint64_t *req);

#endif
