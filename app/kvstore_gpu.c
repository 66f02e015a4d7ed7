// SPDX-License-Identifier: MIT
/*
 * The C KVStore with buffers in CUDA device memory (psched/kvstore.h):
 * the same checks and request tracking as host buffers (kvstore.c), sent
 * as device requests (psched_request() with on_device).
 */
#include "internal.h"
#include "kvstore_gpu.h"

int psd_kvstore_issue_device(struct psched_node *node, enum kvstore_call call,
			     const uint64_t *keys, size_t nkeys,
			     const void *const *vals, void *const *outs,
			     const uint64_t *sizes, enum psched_dtype dtype,
			     int device, int prio, uint64_t *req)
{
	struct psched_request rq = {
		.op = call == CALL_PUSH	  ? PSCHED_OP_PUSH
		      : call == CALL_PULL ? PSCHED_OP_PULL
					  : PSCHED_OP_PUSHPULL,
		.keys = keys,
		.nkeys = nkeys,
		.lens = sizes,
		.push_vals = call != CALL_PULL ? vals : NULL,
		.pull_vals = call != CALL_PUSH ? outs : NULL,
		.dtype = dtype,
		.on_device = true,
		.device = device,
		.priority = prio,
	};

	return psched_request(node, &rq, req);
}

static int kvstore_device_ok(int device)
{
	return device < 0 ? psd_set_errmsg(-EINVAL,
					   "CUDA device %d: not a device index",
					   device)
			  : 0;
}

int psched_kvstore_push_device(struct psched_kvstore *kv, const uint64_t *keys,
			       size_t nkeys, const void *const *vals,
			       const uint64_t *lens, enum psched_dtype dtype,
			       int device, int priority)
{
	int ret = kvstore_device_ok(device);

	return ret ? ret
		   : psd_kvstore_call(kv, CALL_PUSH, keys, nkeys, vals, NULL,
				      lens, dtype, device, priority);
}

int psched_kvstore_pull_device(struct psched_kvstore *kv, const uint64_t *keys,
			       size_t nkeys, void *const *outs,
			       const uint64_t *lens, enum psched_dtype dtype,
			       int device, int priority)
{
	int ret = kvstore_device_ok(device);

	return ret ? ret
		   : psd_kvstore_call(kv, CALL_PULL, keys, nkeys, NULL, outs,
				      lens, dtype, device, priority);
}

int psched_kvstore_pushpull_device(struct psched_kvstore *kv,
				   const uint64_t *keys, size_t nkeys,
				   const void *const *vals, void *const *outs,
				   const uint64_t *lens,
				   enum psched_dtype dtype, int device,
				   int priority)
{
	int ret = kvstore_device_ok(device);

	return ret ? ret
		   : psd_kvstore_call(kv, CALL_PUSHPULL, keys, nkeys, vals,
				      outs, lens, dtype, device, priority);
}
