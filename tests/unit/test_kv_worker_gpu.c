// SPDX-License-Identifier: MIT
/*
 * The worker's device (CUDA) path (worker/kvw_gpu.c, kvw_send.c, kvw_rx.c)
 * without a GPU: the fake servers of test_kv_worker.c, and a fake copier
 * installed with psd_kvw_gpu_use_copier() whose "device memory" is host
 * memory and whose copies happen only when their stream is synchronised
 * (as cudaMemcpyAsync).  What a real GPU adds (the CUDA copier itself) is
 * tested by test_gpu_device and tests/integration/test_gpu_pull.sh.
 */
#define test_list tk_host_test_list
#include "test_kv_worker.c"
#include "../helpers/requests.h"
#undef test_list

#include "gpu/gpu.h"

#define FK_MAX_OPS 64

struct fk_copier {
	pthread_mutex_t lock;
	struct {
		void *dst;
		const void *src;
		size_t len;
		unsigned stream;
	} ops[FK_MAX_OPS];
	unsigned nops;
	unsigned d2h, h2d;
};

static int fk_alloc(void *ctx, size_t len, void **out)
{
	(void)ctx;
	*out = malloc(len);
	return *out ? 0 : -ENOMEM;
}

static void fk_free(void *ctx, void *p)
{
	(void)ctx;
	free(p);
}

static int fk_copy(void *ctx, enum psd_copy_dir dir, int device, void *dst,
		   const void *src, size_t len, unsigned stream)
{
	struct fk_copier *f = ctx;

	CHECK_EQ(device, 0);
	pthread_mutex_lock(&f->lock);
	CHECK(f->nops < FK_MAX_OPS);
	f->ops[f->nops].dst = dst;
	f->ops[f->nops].src = src;
	f->ops[f->nops].len = len;
	f->ops[f->nops].stream = stream;
	f->nops++;
	if (dir == PSD_COPY_D2H)
		f->d2h++;
	else
		f->h2d++;
	pthread_mutex_unlock(&f->lock);
	return 0;
}

/* "Device memory" holds every byte XOR FK_DEV, so bytes sent or received
 * without going through the copier show up as wrong. */
#define FK_DEV 0x5a

static void fk_transcode(uint8_t *dst, const uint8_t *src, size_t len)
{
	while (len--)
		*dst++ = *src++ ^ FK_DEV;
}

static int fk_sync(void *ctx, unsigned stream)
{
	struct fk_copier *f = ctx;
	unsigned i, j = 0;

	pthread_mutex_lock(&f->lock);
	for (i = 0; i < f->nops; i++) {
		if (f->ops[i].stream == stream)
			fk_transcode(f->ops[i].dst, f->ops[i].src,
				     f->ops[i].len);
		else
			f->ops[j++] = f->ops[i];
	}
	f->nops = j;
	pthread_mutex_unlock(&f->lock);
	return 0;
}

static const struct psd_copy_ops fk_ops = {
	.host_alloc = fk_alloc,
	.host_free = fk_free,
	.copy = fk_copy,
	.sync = fk_sync,
};

static struct fk_copier fk;

/* A worker with fake "device" 0 staged through @nslots slots of
 * @slot_bytes. */
static struct tk_ctx *fk_setup(uint64_t part, uint64_t credit,
			       uint64_t slot_bytes, unsigned nslots)
{
	struct tk_ctx *t = tk_setup(1, part, credit, 0);

	memset(&fk, 0, sizeof(fk));
	pthread_mutex_init(&fk.lock, NULL);
	t->n->cfg.gpu_stage_bytes = slot_bytes;
	t->n->cfg.gpu_stage_bufs = nslots;
	t->n->cfg.gpu_streams = 2;
	CHECK_EQ(psd_kvw_gpu_use_copier(t->n, 0, &fk_ops, &fk), 0);
	return t;
}

static uint64_t fk_fnv(const uint8_t *p, size_t n)
{
	uint64_t h = 14695981039346656037ull;

	while (n--)
		h = (h ^ *p++) * 1099511628211ull;
	return h;
}

/*
 * A 128 KiB device push in 16 KiB chunks through 8 KiB slots: every chunk
 * reaches the server with the device bytes, in order; each is copied once,
 * all but the first ahead (while the one before was being sent); at most
 * two chunks' slots are in use.  Then a device pull lands every byte.
 */
static void test_gpu_push_pull_staged(void)
{
	const uint64_t part = 16384, len = 128 * 1024;
	struct tk_ctx *t = fk_setup(part, 0, 8192, 8);
	struct tk_srv *fs = &t->srv[0];
	uint64_t key = tk_key_on(0, 1, len / 4, 100), id, i;
	static uint8_t dev[128 * 1024], out[128 * 1024];
	struct psd_stage_stats st;
	const void *pv = dev;
	void *po = out;

	static uint8_t plain[128 * 1024];

	for (i = 0; i < len; i++) {
		plain[i] = (uint8_t)(i * 13 + (i >> 9));
		dev[i] = plain[i] ^ FK_DEV;
	}
	CHECK_EQ(push_device(t->n, &key, 1, &pv, &len, PSCHED_F32, 0, 0, NULL,
			     NULL, &id),
		 0);
	CHECK_EQ(tk_wait(t, id), 0);
	CHECK_EQ(tk_logged(fs), len / part);
	for (i = 0; i < len / part; i++) {
		CHECK_U64(fs->log[i].offset, ==, i * part);
		CHECK_U64(fs->sum[i], ==, fk_fnv(plain + i * part, part));
	}
	psd_kvw_gpu_stats(kvw_of(t->n), &st);
	CHECK_U64(st.d2h, ==, len / part);
	CHECK_U64(st.ahead_hits, ==, len / part - 1);
	CHECK_INT(st.max_used, <=, 4);
	CHECK_EQ(st.allocs, 1);

	CHECK_EQ(pull_device(t->n, &key, 1, &po, &len, PSCHED_F32, 0, 0, NULL,
			     NULL, &id),
		 0);
	CHECK_EQ(tk_wait(t, id), 0);
	for (i = 0; i < len; i++)
		CHECK_EQ(out[i], tk_pattern(key, i) ^ FK_DEV);
	psd_kvw_gpu_stats(kvw_of(t->n), &st);
	CHECK_U64(st.h2d, ==, len / part);
	CHECK_U64(fk.d2h, ==, len / part);
	tk_teardown(t);
}

/*
 * Priorities and credit unchanged: credit 1 byte (one chunk at a time),
 * server holding answers.  A device push's chunks queue; a more urgent
 * device push arrives and goes next, though the copy of the first push's
 * next chunk had been started ahead (it is dropped and made again later);
 * every chunk still carries its own device bytes.
 */
static void test_gpu_priority_overtakes_copy_ahead(void)
{
	const uint64_t part = 4096, len = 16384;
	struct tk_ctx *t = fk_setup(part, 1, 4096, 4);
	struct tk_srv *fs = &t->srv[0];
	uint64_t ka = tk_key_on(0, 1, len / 4, 200);
	uint64_t kb = tk_key_on(0, 1, len / 4, ka + 1), ida, idb, i;
	static uint8_t a[16384], b[16384];
	struct psd_stage_stats st;
	const void *pa = a, *pb = b;

	static uint8_t pla[16384], plb[16384];

	memset(pla, 0xa1, sizeof(pla));
	memset(plb, 0xb2, sizeof(plb));
	for (i = 0; i < len; i += 97)
		pla[i] = (uint8_t)i, plb[i] = (uint8_t)~i;
	fk_transcode(a, pla, len);
	fk_transcode(b, plb, len);
	tk_hold(fs, true);
	CHECK_EQ(push_device(t->n, &ka, 1, &pa, &len, PSCHED_F32, 0, 5, NULL,
			     NULL, &ida),
		 0);
	tk_wait_logged(fs, 1); /* chunk a0 out, a1 copied ahead */
	CHECK_EQ(push_device(t->n, &kb, 1, &pb, &len, PSCHED_F32, 0, 1, NULL,
			     NULL, &idb),
		 0);
	for (i = 0; i < 8; i++) {
		CHECK_EQ(tk_logged(fs), i + 1);
		tk_srv_answer(fs, i);
		if (i < 7)
			tk_wait_logged(fs, i + 2);
	}
	CHECK_EQ(tk_wait(t, ida), 0);
	CHECK_EQ(tk_wait(t, idb), 0);
	/* a0, then all of b (priority 1), then a1..a3. */
	CHECK_U64(fs->log[0].key, ==, ka);
	for (i = 1; i < 5; i++)
		CHECK_U64(fs->log[i].key, ==, kb);
	for (i = 5; i < 8; i++)
		CHECK_U64(fs->log[i].key, ==, ka);
	for (i = 0; i < 8; i++) {
		const uint8_t *src = fs->log[i].key == ka ? pla : plb;

		CHECK_U64(fs->sum[i], ==,
			  fk_fnv(src + fs->log[i].offset, part));
	}
	CHECK_EQ(fs->max_unacked_msgs, 1);
	psd_kvw_gpu_stats(kvw_of(t->n), &st);
	CHECK_U64(st.ahead_dropped, >=, 1);
	CHECK_U64(st.d2h, ==, 8 + st.ahead_dropped);
	tk_teardown(t);
}

/* A chunk larger than the whole pool fails its request with a message
 * naming the knobs; the worker goes on. */
static void test_gpu_chunk_too_big(void)
{
	const uint64_t len = 64 * 1024;
	struct tk_ctx *t = fk_setup(0, 0, 4096, 4);
	uint64_t key = tk_key_on(0, 1, len / 4, 300), id;
	static uint8_t dev[64 * 1024];
	const void *pv = dev;
	char msg[512];
	int ret;

	CHECK_EQ(push_device(t->n, &key, 1, &pv, &len, PSCHED_F32, 0, 0, NULL,
			     NULL, &id),
		 0);
	ret = tk_wait(t, id);
	snprintf(msg, sizeof(msg), "%s", psched_errmsg());
	CHECK_EQ(ret, -E2BIG);
	CHECK(strstr(msg, "PS_GPU_STAGE_BYTES") != NULL);
	CHECK(strstr(msg, "65536 bytes") != NULL);
	tk_teardown(t);
}

/* Bad device arguments are refused before anything is queued. */
static void test_gpu_bad_device(void)
{
	struct tk_ctx *t = fk_setup(0, 0, 4096, 4);
	static uint8_t dev[64];
	uint64_t key = 5, len = sizeof(dev), id;
	const void *pv = dev;

	CHECK_EQ(push_device(t->n, &key, 1, &pv, &len, PSCHED_F32, -2, 0, NULL,
			     NULL, &id),
		 -EINVAL);
	CHECK(strstr(psched_errmsg(), "-2") != NULL);
	/* Another device than the one this worker stages. */
	CHECK_EQ(push_device(t->n, &key, 1, &pv, &len, PSCHED_F32, 1, 0, NULL,
			     NULL, &id),
		 -EINVAL);
	CHECK(strstr(psched_errmsg(), "one device per worker") != NULL);
	CHECK_EQ(tk_logged(&t->srv[0]), 0);
	tk_teardown(t);
}

/* ---- GPUDirect RDMA (PS_GPU_DIRECT) ---- */

/* The decision alone: the probe runs only when it matters. */
struct fk_probe {
	unsigned calls;
	bool on;
};

static bool fk_probe_fn(int device, void *arg, char *why, size_t len)
{
	struct fk_probe *pr = arg;

	CHECK_EQ(device, 3);
	pr->calls++;
	snprintf(why, len, "probe-%s", pr->on ? "yes" : "no");
	return pr->on;
}

static void test_gpu_direct_choose(void)
{
	static const struct {
		const char *mode, *transport;
		bool probe_on;
		int want;
		unsigned calls;
		const char *why;
	} tc[] = {
		{ "auto", "rdma", true, PSD_GPU_DIRECT, 1, "probe-yes" },
		{ "auto", "rdma", false, PSD_GPU_STAGE, 1, "probe-no" },
		{ "auto", "tcp", true, PSD_GPU_STAGE, 0, "tcp transport" },
		{ "auto", NULL, true, PSD_GPU_STAGE, 0, "(none)" },
		{ "0", "rdma", true, PSD_GPU_STAGE, 0, "PS_GPU_DIRECT=0" },
		{ "1", "rdma", true, PSD_GPU_DIRECT, 1, "probe-yes" },
		{ "1", "rdma", false, -EOPNOTSUPP, 1, "probe-no" },
		{ "1", "shm", true, -EOPNOTSUPP, 0, "shm transport" },
	};
	char why[256];
	size_t i;

	for (i = 0; i < PSD_ARRAY_SIZE(tc); i++) {
		struct fk_probe pr = { .on = tc[i].probe_on };

		why[0] = 0;
		CHECK_EQ(psd_gpu_direct_choose(tc[i].mode, tc[i].transport,
					       fk_probe_fn, &pr, 3, why,
					       sizeof(why)),
			 tc[i].want);
		CHECK_EQ(pr.calls, tc[i].calls);
		CHECK(strstr(why, tc[i].why) != NULL);
	}
}

/*
 * A transport whose request sends may return before the peer read the
 * payload (transport.h, req_send_early: shm, rdma) gets staging slots
 * that stay the chunk's until its answer.  Pool of one chunk, server
 * holding answers, a 2-chunk device push: with such a transport chunk 1
 * cannot take the slots (chunk 0's send returned but it is unanswered)
 * until chunk 0 is answered; with plain loop both go out at once.  Every
 * chunk carries its own bytes either way.
 */
static void test_gpu_staging_held_until_answer(void)
{
	const uint64_t part = 8192, len = 16384;
	static struct psd_transport_ops early;
	static uint8_t dev[16384], plain[16384];
	const void *pv = dev;
	int k;

	for (size_t i = 0; i < len; i++)
		plain[i] = (uint8_t)(i * 7 + (i >> 8));
	fk_transcode(dev, plain, len);
	early = psd_loop_ops;
	early.req_send_early = true;
	for (k = 0; k < 2; k++) {
		struct tk_ctx *t;
		struct tk_srv *fs;
		uint64_t key, id, i;

		tk_worker_ops = k ? &early : NULL;
		t = fk_setup(part, 0, 4096, 2);
		tk_worker_ops = NULL;
		fs = &t->srv[0];
		key = tk_key_on(0, 1, len / 4, 300);
		tk_hold(fs, true);
		CHECK_EQ(push_device(t->n, &key, 1, &pv, &len, PSCHED_F32, 0, 0,
				     NULL, NULL, &id),
			 0);
		if (!k) {
			tk_wait_logged(fs, 2); /* both out, none answered */
		} else {
			tk_wait_logged(fs, 1);
			usleep(200 * 1000);
			CHECK_EQ(tk_logged(fs), 1); /* chunk 1 waits */
			tk_srv_answer(fs, 0);
			tk_wait_logged(fs, 2);
		}
		tk_srv_answer(fs, k ? 1 : 0);
		if (!k)
			tk_srv_answer(fs, 1);
		CHECK_EQ(tk_wait(t, id), 0);
		for (i = 0; i < len / part; i++)
			CHECK_U64(fs->sum[i], ==,
				  fk_fnv(plain + i * part, part));
		tk_teardown(t);
	}
}

/* The worker's transport in these tests: loop, named "rdma", with a
 * ->send_dev() that records what it was handed and can refuse, and a
 * ->progress() that says whether answers are "NIC-written" (rx_direct,
 * as rdma says for a rendezvous). */
#define FK_MAX_DEV 64

static struct {
	pthread_mutex_t lock;
	const void *ptr[FK_MAX_DEV];
	size_t len[FK_MAX_DEV];
	unsigned n;
	atomic_bool refuse;	/* registration "fails": -EOPNOTSUPP */
	atomic_bool rx_direct;	/* answers come as RDMA writes */
	atomic_int in_progress; /* van threads inside fk_progress() */
} fkr;

static struct psd_transport_ops fk_rdma_ops;

static int fk_send_dev(struct psd_conn *c, const struct psd_hdr *h,
		       const struct iovec *iov, int niov, unsigned timeout_ms)
{
	pthread_mutex_lock(&fkr.lock);
	CHECK_EQ(niov, 1);
	if (fkr.n < FK_MAX_DEV) {
		fkr.ptr[fkr.n] = iov[0].iov_base;
		fkr.len[fkr.n] = iov[0].iov_len;
		fkr.n++;
	}
	pthread_mutex_unlock(&fkr.lock);
	if (atomic_load(&fkr.refuse))
		return psd_set_errmsg(-EOPNOTSUPP, "test: no registration");
	return psd_loop_ops.send(c, h, iov, niov, timeout_ms);
}

static int fk_progress(struct psd_conn *c)
{
	int ret;

	atomic_fetch_add(&fkr.in_progress, 1);
	c->rx_direct = atomic_load(&fkr.rx_direct);
	ret = psd_loop_ops.progress(c);
	atomic_fetch_sub(&fkr.in_progress, 1);
	return ret;
}

/* Answers from now on come as RDMA writes (@on) or not.  One progress()
 * call delivers every message that arrives while it runs, with the flag
 * it read on entry: wait until no call that read the old value is still
 * running. */
static void fk_set_rx_direct(bool on)
{
	uint64_t t0 = psd_now_ms();

	atomic_store(&fkr.rx_direct, on);
	while (atomic_load(&fkr.in_progress)) {
		CHECK(psd_now_ms() - t0 < 10000);
		usleep(200);
	}
}

static struct tk_ctx *fk_setup_direct(uint64_t part, const char *mode,
				      const char *transport, bool probe_on,
				      int want)
{
	struct tk_ctx *t;

	memset(&fkr, 0, sizeof(fkr));
	pthread_mutex_init(&fkr.lock, NULL);
	fk_rdma_ops = psd_loop_ops;
	fk_rdma_ops.name = "rdma";
	fk_rdma_ops.send_dev = fk_send_dev;
	fk_rdma_ops.progress = fk_progress;
	tk_worker_ops = &fk_rdma_ops;
	atomic_store(&tk_rx_dev_count, 0);
	t = fk_setup(part, 0, 8192, 8);
	tk_worker_ops = NULL;
	snprintf(t->n->cfg.gpu_direct, sizeof(t->n->cfg.gpu_direct), "%s",
		 mode);
	CHECK_EQ(psd_kvw_gpu_fake_direct(t->n, transport, probe_on), want);
	return t;
}

/*
 * GPUDirect on: a 128 KiB device push leaves as 8 chunks whose payload
 * pointers, handed to ->send_dev(), are the device addresses themselves;
 * the copier is never called; the server gets the device bytes verbatim.
 * A pull whose answers the NIC writes lands in device memory with no
 * copy; answers the transport would copy (not rx_direct) are staged.
 */
static void test_gpu_direct_on(void)
{
	const uint64_t part = 16384, len = 128 * 1024;
	struct tk_ctx *t =
		fk_setup_direct(part, "auto", "rdma", true, PSD_GPU_DIRECT);
	struct tk_srv *fs = &t->srv[0];
	uint64_t key = tk_key_on(0, 1, len / 4, 400), id, i;
	static uint8_t dev[128 * 1024], out[128 * 1024];
	struct psd_stage_stats st;
	const void *pv = dev;
	void *po = out;

	for (i = 0; i < len; i++)
		dev[i] = (uint8_t)(i * 31 + (i >> 10));
	CHECK_EQ(push_device(t->n, &key, 1, &pv, &len, PSCHED_F32, 0, 0, NULL,
			     NULL, &id),
		 0);
	CHECK_EQ(tk_wait(t, id), 0);
	CHECK_EQ(tk_logged(fs), len / part);
	CHECK_EQ(fkr.n, len / part);
	for (i = 0; i < len / part; i++) {
		CHECK(fkr.ptr[i] == dev + fs->log[i].offset);
		CHECK_U64(fkr.len[i], ==, part);
		CHECK_U64(fs->sum[i], ==,
			  fk_fnv(dev + fs->log[i].offset, part));
	}
	CHECK_EQ(fk.d2h, 0);
	CHECK_EQ(fk.nops, 0);

	fk_set_rx_direct(true);
	memset(out, 0, sizeof(out));
	CHECK_EQ(pull_device(t->n, &key, 1, &po, &len, PSCHED_F32, 0, 0, NULL,
			     NULL, &id),
		 0);
	CHECK_EQ(tk_wait(t, id), 0);
	for (i = 0; i < len; i++)
		CHECK_EQ(out[i], tk_pattern(key, i));
	CHECK_EQ(atomic_load(&tk_rx_dev_count), len / part);
	CHECK_EQ(fk.h2d, 0);
	psd_kvw_gpu_stats(kvw_of(t->n), &st);
	CHECK_U64(st.d2h, ==, 0);
	CHECK_U64(st.h2d, ==, 0);

	/* Answers the transport copies with the CPU: staged. */
	fk_set_rx_direct(false);
	CHECK_EQ(pull_device(t->n, &key, 1, &po, &len, PSCHED_F32, 0, 0, NULL,
			     NULL, &id),
		 0);
	CHECK_EQ(tk_wait(t, id), 0);
	for (i = 0; i < len; i++)
		CHECK_EQ(out[i], tk_pattern(key, i) ^ FK_DEV);
	CHECK_EQ(atomic_load(&tk_rx_dev_count), len / part);
	CHECK_EQ(fk.h2d, len / part);
	tk_teardown(t);
}

/* GPUDirect off (PS_GPU_DIRECT=0, or auto with a failed probe, or a
 * transport without it): ->send_dev() is never called, every chunk is
 * staged through the copier. */
static void test_gpu_direct_off_stages(void)
{
	static const struct {
		const char *mode, *transport;
		bool probe_on;
	} tc[] = {
		{ "auto", "rdma", false },
		{ "0", "rdma", true },
		{ "auto", "tcp", true },
	};
	const uint64_t part = 16384, len = 64 * 1024;
	static uint8_t dev[64 * 1024], plain[64 * 1024];
	uint64_t id, i;
	size_t k;

	for (i = 0; i < len; i++) {
		plain[i] = (uint8_t)(i * 5 + 1);
		dev[i] = plain[i] ^ FK_DEV;
	}
	for (k = 0; k < PSD_ARRAY_SIZE(tc); k++) {
		struct tk_ctx *t =
			fk_setup_direct(part, tc[k].mode, tc[k].transport,
					tc[k].probe_on, PSD_GPU_STAGE);
		struct tk_srv *fs = &t->srv[0];
		uint64_t key = tk_key_on(0, 1, len / 4, 500 + k);
		const void *pv = dev;

		CHECK_EQ(push_device(t->n, &key, 1, &pv, &len, PSCHED_F32, 0, 0,
				     NULL, NULL, &id),
			 0);
		CHECK_EQ(tk_wait(t, id), 0);
		CHECK_EQ(tk_logged(fs), len / part);
		for (i = 0; i < len / part; i++)
			CHECK_U64(fs->sum[i], ==,
				  fk_fnv(plain + fs->log[i].offset, part));
		CHECK_EQ(fkr.n, 0);
		CHECK_EQ(fk.d2h, len / part);
		tk_teardown(t);
	}
}

/* The transport cannot register the device memory: nothing was sent, so
 * each chunk is staged and sent the ordinary way; the push succeeds. */
static void test_gpu_direct_refused_falls_back(void)
{
	const uint64_t part = 16384, len = 64 * 1024;
	struct tk_ctx *t =
		fk_setup_direct(part, "1", "rdma", true, PSD_GPU_DIRECT);
	struct tk_srv *fs = &t->srv[0];
	uint64_t key = tk_key_on(0, 1, len / 4, 600), id, i;
	static uint8_t dev[64 * 1024], plain[64 * 1024];
	const void *pv = dev;

	for (i = 0; i < len; i++) {
		plain[i] = (uint8_t)(i * 11 + 7);
		dev[i] = plain[i] ^ FK_DEV;
	}
	atomic_store(&fkr.refuse, true);
	CHECK_EQ(push_device(t->n, &key, 1, &pv, &len, PSCHED_F32, 0, 0, NULL,
			     NULL, &id),
		 0);
	CHECK_EQ(tk_wait(t, id), 0);
	CHECK_EQ(tk_logged(fs), len / part);
	for (i = 0; i < len / part; i++)
		CHECK_U64(fs->sum[i], ==,
			  fk_fnv(plain + fs->log[i].offset, part));
	CHECK_EQ(fkr.n, len / part);
	CHECK_EQ(fk.d2h, len / part);
	tk_teardown(t);
}

/* PS_GPU_DIRECT=1 where it is not possible is refused, naming why. */
static void test_gpu_direct_required(void)
{
	struct tk_ctx *t = fk_setup_direct(0, "1", "rdma", false, -EOPNOTSUPP);

	CHECK(strstr(psched_errmsg(), "PS_GPU_DIRECT=1") != NULL);
	CHECK(strstr(psched_errmsg(), "test probe says off") != NULL);
	tk_teardown(t);
}

const struct test_case test_list[] = {
	{ "gpu push and pull staged, copy ahead", test_gpu_push_pull_staged },
	{ "gpu priority overtakes the copy ahead",
	  test_gpu_priority_overtakes_copy_ahead },
	{ "gpu chunk larger than the pool", test_gpu_chunk_too_big },
	{ "gpu staging slots held until the answer (early-return sends)",
	  test_gpu_staging_held_until_answer },
	{ "gpu bad device", test_gpu_bad_device },
	{ "gpu direct: the decision", test_gpu_direct_choose },
	{ "gpu direct on: device pointers to the transport, no copies",
	  test_gpu_direct_on },
	{ "gpu direct off: staged", test_gpu_direct_off_stages },
	{ "gpu direct refused by the transport: staged",
	  test_gpu_direct_refused_falls_back },
	{ "gpu direct required but impossible", test_gpu_direct_required },
	{ NULL, NULL },
};
