// SPDX-License-Identifier: MIT
/*
 * A worker of a real 2-worker cluster exercising device (CUDA) buffers.
 *
 *   gpu_worker refused   device requests are refused with a clear error
 *                        (no CUDA device here: "no CUDA device: ..."; with
 *                        one: device 9999 does not exist, a host pointer
 *                        is not device memory); then host pushpulls of
 *                        the same node still sum exactly.
 *   gpu_worker compare   (needs a GPU, else exit 77 saying why) the same
 *                        values pushpulled from host and from device
 *                        memory: the device pull equals the host pull,
 *                        over chunked keys larger than one staging slot.
 * See tests/integration/test_gpu_refused.sh, test_gpu_pull.sh.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "psched.h"
#include "gpu/gpu.h"

#define CHECK_WHO "gpu_worker rank %d", rank
#include "check.h"
#include "requests.h"

static int rank = -1;

/* Worker w's push of element i at step s: exact in float32. */
static float val(int w, size_t i, int s)
{
	return (float)((w + 1) * 3 + (int)(i % 1000) + s * 7);
}

static float expect(size_t i, int s)
{
	return val(0, i, s) + val(1, i, s);
}

static void host_steps(struct psched_node *n, uint64_t key, size_t cnt,
		       int first, int steps)
{
	float *v = malloc(cnt * sizeof(float)), *o = malloc(cnt * sizeof(*o));
	uint64_t len = cnt * sizeof(float), req;
	const void *pv = v;
	void *po = o;
	size_t i;
	int s, ret;

	CHECK(v && o, "no memory");
	for (s = first; s < first + steps; s++) {
		for (i = 0; i < cnt; i++)
			v[i] = val(rank, i, s);
		ret = psched_pushpull(n, &key, 1, &pv, &po, &len, PSCHED_F32, 0,
				      NULL, NULL, &req);
		CHECK(!ret, "host pushpull: %s", psched_errmsg());
		ret = psched_wait(n, req, 0);
		CHECK(!ret, "host pushpull wait: %s", psched_errmsg());
		for (i = 0; i < cnt; i++)
			CHECK(o[i] == expect(i, s),
			      "key %llu step %d [%zu]: %g "
			      "want %g",
			      (unsigned long long)key, s, i, o[i],
			      expect(i, s));
	}
	free(v);
	free(o);
}

static int run_refused(struct psched_node *n)
{
	float host[256];
	uint64_t key = 1, len = sizeof(host), req;
	const void *pv = host;
	void *po = host;
	bool gpu = psched_cuda_check(0) == 0;
	int dev = gpu ? 9999 : 0, ret;

	memset(host, 0, sizeof(host));
	ret = pushpull_device(n, &key, 1, &pv, &po, &len, PSCHED_F32, dev, 0,
			      NULL, NULL, &req);
	CHECK(ret == -ENODEV, "pushpull_device: %d (%s)", ret, psched_errmsg());
	if (!psched_cuda_built())
		CHECK(strstr(psched_errmsg(), "built without CUDA"), "%s",
		      psched_errmsg());
	else if (!gpu)
		CHECK(strstr(psched_errmsg(), "no CUDA device"), "%s",
		      psched_errmsg());
	else
		CHECK(strstr(psched_errmsg(), "9999 does not exist"), "%s",
		      psched_errmsg());
	printf("refused as expected: %s\n", psched_errmsg());
	ret = pull_device(n, &key, 1, &po, &len, PSCHED_F32, dev, 0, NULL, NULL,
			  &req);
	CHECK(ret == -ENODEV, "pull_device: %d", ret);
	ret = push_device(n, &key, 1, &pv, &len, PSCHED_F32, -1, 0, NULL, NULL,
			  &req);
	CHECK(ret == -EINVAL && strstr(psched_errmsg(), "-1"),
	      "device -1: %d %s", ret, psched_errmsg());
	if (gpu) {
		/* A host pointer is no device memory. */
		ret = push_device(n, &key, 1, &pv, &len, PSCHED_F32, 0, 0, NULL,
				  NULL, &req);
		CHECK(ret == -EINVAL && strstr(psched_errmsg(), "host memory"),
		      "host pointer: %d %s", ret, psched_errmsg());
	}
	/* The node is unaffected: host tensors sum exactly. */
	host_steps(n, 1, 256, 0, 3);
	host_steps(n, 2, 300000, 0, 3);
	printf("host pushpull exact after the refusals\n");
	return 0;
}

static int run_compare(struct psched_node *n)
{
	const size_t cnt = 300000; /* 1.2 MB: several chunks and slots */
	uint64_t hkey = 10, dkey = 11, len = cnt * sizeof(float), req[2];
	float *v = malloc(len), *ho = malloc(len), *dback = malloc(len);
	void *dv = NULL, *dout = NULL, *pho = ho;
	const void *pv = v, *pdv;
	size_t i;
	int s, ret;

	if (psched_cuda_check(0)) {
		printf("%s\n", psched_errmsg());
		return 77;
	}
	CHECK(v && ho && dback, "no memory");
	CHECK(!psd_gpu_malloc(0, len, &dv) && !psd_gpu_malloc(0, len, &dout),
	      "cudaMalloc: %s", psched_errmsg());
	pdv = dv;
	for (s = 0; s < 4; s++) {
		for (i = 0; i < cnt; i++)
			v[i] = val(rank, i, s);
		CHECK(!psd_gpu_memcpy(dv, v, len, true), "%s", psched_errmsg());
		ret = psched_pushpull(n, &hkey, 1, &pv, &pho, &len, PSCHED_F32,
				      0, NULL, NULL, &req[0]);
		CHECK(!ret, "host: %s", psched_errmsg());
		ret = pushpull_device(n, &dkey, 1, &pdv, &dout, &len,
				      PSCHED_F32, 0, 0, NULL, NULL, &req[1]);
		CHECK(!ret, "device: %s", psched_errmsg());
		CHECK(!psched_wait(n, req[0], 0), "%s", psched_errmsg());
		CHECK(!psched_wait(n, req[1], 0), "%s", psched_errmsg());
		CHECK(!psd_gpu_memcpy(dback, dout, len, false), "%s",
		      psched_errmsg());
		CHECK(!memcmp(dback, ho, len),
		      "step %d: device pull differs "
		      "from host pull",
		      s);
		for (i = 0; i < cnt; i++)
			CHECK(ho[i] == expect(i, s), "[%zu] %g", i, ho[i]);
	}
	/* A plain device pull of the stored value, too. */
	ret = pull_device(n, &dkey, 1, &dout, &len, PSCHED_F32, 0, 0, NULL,
			  NULL, &req[1]);
	CHECK(!ret && !psched_wait(n, req[1], 0), "%s", psched_errmsg());
	CHECK(!psd_gpu_memcpy(dback, dout, len, false), "%s", psched_errmsg());
	CHECK(!memcmp(dback, ho, len), "device pull differs from host pull");
	printf("device pull == host pull over 4 steps of %zu floats\n", cnt);
	psd_gpu_free(dv);
	psd_gpu_free(dout);
	free(v);
	free(ho);
	free(dback);
	return 0;
}

int main(int argc, char **argv)
{
	struct psched_cfg *cfg = NULL;
	struct psched_node *n;
	int ret, rc;

	if (argc != 2 ||
	    (strcmp(argv[1], "refused") && strcmp(argv[1], "compare"))) {
		fprintf(stderr, "usage: gpu_worker refused|compare\n");
		return 2;
	}
	CHECK(!psched_cfg_create(&cfg) && !psched_cfg_from_env(cfg) &&
		      !psched_cfg_set(cfg, "role", "worker"),
	      "%s", psched_errmsg());
	ret = psched_node_create(cfg, &n);
	psched_cfg_destroy(cfg);
	CHECK(!ret, "create: %s", psched_errmsg());
	rank = psched_node_rank(n);
	CHECK(psched_num_workers(n) == 2, "needs 2 workers");
	rc = !strcmp(argv[1], "refused") ? run_refused(n) : run_compare(n);
	CHECK(!psched_node_destroy(n), "destroy: %s", psched_errmsg());
	return rc;
}
