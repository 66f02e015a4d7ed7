// SPDX-License-Identifier: MIT
/*
 * libFuzzer harness: a KV worker's receive side, in process.  One detached
 * worker node (worker/kvw.h: KV layer and sender thread, no van or
 * scheduler) with two servers whose connections go nowhere.  Per input the
 * worker issues one pushpull (key and size from the first byte: one
 * server, or split over both), then the input's frames arrive as the
 * servers' answers through the van's own dispatch: push acks, pull
 * answers (payloads land in the caller's buffer), RequestError and
 * CommandAck control messages.  A frame whose req is 0 answers the
 * outstanding request.  The request is then waited for (1 ms) and freed.
 */
#include "fuzz_util.h"
#include "node.h"
#include "../../worker/kvw.h"

#define FZ_NSRV	      2
#define FZ_MAX_TENSOR (1u << 20)

static struct psched_node *node;
static struct psd_van *van;
static struct psd_conn *conns[FZ_NSRV];
static float push_buf[64 * 1024], pull_buf[64 * 1024];

static int fz_rx_header(void *arg, struct psd_conn *c, const struct psd_hdr *h,
			void **dst)
{
	struct psched_node *n = arg;

	return n->role->rx_header(n, c, h, dst);
}

static void fz_rx_data(void *arg, struct psd_conn *c, const struct psd_hdr *h,
		       void *payload)
{
	struct psched_node *n = arg;

	n->role->rx_data(n, c, h, payload);
}

static void fz_rx_control(void *arg, struct psd_conn *c,
			  const Psched__Control *m)
{
	struct psched_node *n = arg;

	n->role->rx_control(n, c, m);
}

static void fz_init(void)
{
	struct psd_van_opts o = { .ops = &psd_loop_ops,
				  .max_tensor = FZ_MAX_TENSOR,
				  .send_timeout_ms = 1000 };
	struct psd_van_cb cb = { .rx_header = fz_rx_header,
				 .rx_data = fz_rx_data,
				 .rx_control = fz_rx_control };
	struct psched_cfg cfg;
	unsigned s;

	psd_log_level = -1;
	psd_cfg_defaults(&cfg);
	cfg.max_tensor_bytes = FZ_MAX_TENSOR;
	cfg.request_timeout_ms = 1000;
	if (psd_kvw_node_create_detached(&cfg, FZ_NSRV, &node))
		abort();
	cb.arg = node;
	if (psd_van_create(&o, &cb, &van))
		abort();
	for (s = 0; s < FZ_NSRV; s++) {
		struct psd_peer *p = psd_node_peer(node, psd_server_id(s));

		conns[s] = fz_conn(van, p->id, p->desc);
		p->conn = conns[s];
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const uint64_t lens[] = { 64, 4096, sizeof(push_buf) };
	struct fz_reader rd = { data + 1, size ? size - 1 : 0 };
	uint8_t setup = size ? data[0] : 0;
	uint64_t key = setup % 3, len = lens[key], req = 0;
	const void *pv = push_buf;
	void *qv = pull_buf;
	const uint8_t *payload;
	struct psd_hdr h;
	unsigned s;

	if (!node)
		fz_init();
	/* A failure of an earlier input (a fatal RequestError, a dropped
	 * connection) would make every later one trivial. */
	pthread_mutex_lock(&node->lock);
	node->fatal = 0;
	pthread_mutex_unlock(&node->lock);
	for (s = 0; s < FZ_NSRV; s++)
		atomic_store(&conns[s]->closed, false);
	if (psched_pushpull(node, &key, 1, &pv, &qv, &len, PSCHED_F32, 0, NULL,
			    NULL, &req))
		return 0;
	while (fz_next(&rd, FZ_MAX_TENSOR, &h, &payload)) {
		if (!h.req)
			h.req = req;
		fz_deliver(conns[(uint32_t)h.sender % FZ_NSRV], &h, payload);
	}
	psched_wait(node, req, 1);
	return 0;
}
