// SPDX-License-Identifier: MIT
/*
 * libFuzzer harness: a KV server's receive side, in process.  A server
 * node is built by hand (as tests/unit/test_kv_server.c does) with 1-3
 * workers whose connections go nowhere; the input's frames are delivered
 * through the van's own dispatch (psd_van_rx_header/psd_van_rx_msg) to the
 * server's hooks: data requests (init, push, pull, pushpull at any step,
 * offset, size, dtype, epoch), ServerCommand and Config control messages,
 * and at the end, if the input says so, a worker's death.  Fresh server
 * state per input.
 *
 * The first input byte picks the setup: bit 0 async, bits 1-2 workers
 * (1..3), bit 3 partition 64 bytes, bit 4 two servers (this is rank 0),
 * bit 5 worker 0 dies at the end.
 */
#include "fuzz_util.h"
#include "node.h"
#include "../../server/kvs.h"
#include "../../server/role.h"

#define FZ_MAX_W      3
#define FZ_MAX_TENSOR (1u << 20)

static struct psched_node node;
static struct psd_peer peers[1 + 2 + FZ_MAX_W];
static struct psd_van *van;

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

/* What the postoffice does with a control message on a data connection;
 * a Config comes from the scheduler, played here by any connection. */
static void fz_rx_control(void *arg, struct psd_conn *c,
			  const Psched__Control *m)
{
	struct psched_node *n = arg;

	if (m->body_case == PSCHED__CONTROL__BODY_CONFIG)
		n->role->on_config(n, m->config);
	else
		n->role->rx_control(n, c, m);
}

static void fz_setup_node(uint8_t setup, unsigned *nw)
{
	struct psched_node *n = &node;
	unsigned r, s;

	*nw = 1 + (setup >> 1 & 3) % FZ_MAX_W;
	memset(n, 0, sizeof(*n));
	memset(peers, 0, sizeof(peers));
	psd_cfg_defaults(&n->cfg);
	n->cfg.role = PSCHED_ROLE_SERVER;
	snprintf(n->cfg.server_mode, sizeof(n->cfg.server_mode), "%s",
		 setup & 1 ? "async" : "sync");
	n->cfg.partition_bytes = setup & 8 ? 64 : 0;
	n->cfg.max_tensor_bytes = FZ_MAX_TENSOR;
	n->cfg.max_steps_ahead = 4;
	n->cfg.max_parked_bytes = 2 * FZ_MAX_TENSOR;
	n->num_server = setup & 16 ? 2 : 1;
	n->num_worker = *nw;
	n->id = psd_server_id(0);
	n->rank = 0;
	n->van = van;
	n->peers = peers;
	n->npeers = 1 + n->num_server + *nw;
	pthread_mutex_init(&n->lock, NULL);
	pthread_cond_init(&n->cond, NULL);
	for (s = 0; s < n->num_server; s++) {
		struct psd_peer *p = &peers[psd_server_id(s)];

		p->id = psd_server_id(s);
		p->role = PSCHED_ROLE_SERVER;
		p->rank = (int)s;
		snprintf(p->desc, sizeof(p->desc), "server %d", p->id);
	}
	for (r = 0; r < *nw; r++) {
		struct psd_peer *p = &peers[psd_worker_id(n, r)];

		p->id = psd_worker_id(n, r);
		p->role = PSCHED_ROLE_WORKER;
		p->rank = (int)r;
		snprintf(p->desc, sizeof(p->desc), "worker %d (rank %u)", p->id,
			 r);
	}
	n->role = &psd_kvs_role;
	if (psd_kvs_attach(n))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct psd_conn *conns[FZ_MAX_W];
	struct fz_reader rd = { data + 1, size ? size - 1 : 0 };
	const uint8_t *payload;
	struct psd_hdr h;
	unsigned nw, r;
	uint8_t setup = size ? data[0] : 0;

	if (!van) {
		struct psd_van_opts o = { .ops = &psd_loop_ops,
					  .max_tensor = FZ_MAX_TENSOR,
					  .send_timeout_ms = 1000 };
		struct psd_van_cb cb = { .arg = &node,
					 .rx_header = fz_rx_header,
					 .rx_data = fz_rx_data,
					 .rx_control = fz_rx_control };

		psd_log_level = -1;
		if (psd_van_create(&o, &cb, &van))
			abort();
	}
	fz_setup_node(setup, &nw);
	for (r = 0; r < nw; r++) {
		struct psd_peer *p = &peers[psd_worker_id(&node, r)];

		conns[r] = fz_conn(van, p->id, p->desc);
		p->conn = conns[r];
	}
	while (fz_next(&rd, FZ_MAX_TENSOR, &h, &payload)) {
		/* The sender field picks the connection it arrives on. */
		struct psd_conn *c = conns[(uint32_t)h.sender % nw];

		fz_deliver(c, &h, payload);
	}
	if (setup & 32)
		node.role->peer_failed(&node, &peers[psd_worker_id(&node, 0)],
				       PSCHED_ENODEDEAD, "fuzz");
	for (r = 0; r < nw; r++) {
		node.role->conn_closed(&node, conns[r]);
		psd_conn_put(conns[r]);
	}
	/* Every held early push was applied or freed with its connection:
	 * none may stay counted against the budget. */
	if (psd_kvs_of(&node)->parked_bytes)
		abort();
	node.role->detach(&node);
	pthread_mutex_destroy(&node.lock);
	pthread_cond_destroy(&node.cond);
	return 0;
}
