// SPDX-License-Identifier: MIT
/*
 * libFuzzer harness: the postoffice's control plane on a server or a
 * worker (common/postoffice.c po_rx_control() and what it dispatches, the
 * handshake of common/auth.c), in process and synchronous.  Per input a
 * fresh node (the real KV server or KV worker role, created by
 * psd_node_create() with a start hook that builds the van with the
 * postoffice's callbacks, psd_po_van_cb(), instead of joining a
 * scheduler) whose scheduler link and data connections are connections
 * that send nowhere (fuzz_util.h).  The input's frames go through the
 * van's own checks and dispatch (psd_van_rx_header(), psd_van_rx_msg():
 * the pre-authentication limits, protobuf-c unpack), as a transport
 * delivers them; a connection the handlers drop gets the van's closed
 * callback (po_closed(), the role's conn_closed and peer_failed).
 *
 * Input: one setup byte, then frames (fuzz_util.h layout).  Setup bits
 * 0-1 pick the state the frames meet:
 *   0 joining: no node table, the scheduler link not authenticated (our
 *     Register went out with a nonce: the Challenge is due); a server
 *     (bit 2 clear) also has two accepted, unauthenticated data
 *     connections (hellos before the table wait for it)
 *   1 server, scheduler authenticated, no node table yet; two accepted
 *     data connections, not authenticated
 *   2 server with the node table (servers 1-2, workers 3-4;
 *     we are server 1); two accepted data connections, not authenticated
 *   3 worker 3 with the node table; its data connections to servers 1
 *     and 2 sent Hello with a nonce (their Challenge is due)
 * Bit 3: at the end every connection still open closes (peer lost);
 * otherwise they close at the node's shutdown, as the van drops them.
 * A frame goes to connection (raw reserved byte 92) % 3: 0 is the
 * scheduler link, 1 and 2 the data connections.
 *
 * The harness knows the job's secret, so the fuzzer can finish a
 * handshake: a Challenge or a Proof whose proof is the single byte 0xA5
 * gets the right proof for that connection's nonces (any other proof is
 * checked as sent).  FUZZ_NODE_LOG=1 shows the node's log (what an
 * input reached).
 */
#include "fuzz_util.h"
#include "node.h"
#include "../../server/role.h"
#include "../../worker/role.h"

#define FZ_NCONN      3 /* scheduler link + 2 data connections */
#define FZ_MAX_FRAMES 256
#define FZ_TOKEN      "fuzz-node-job-token-0123456789"

static unsigned fz_mode;
static struct psd_role_ops fz_server_role, fz_worker_role;

/* A connection of @van that sends nowhere, not authenticated. */
static struct psd_conn *fz_conn_new(struct psd_van *van, int peer_id,
				    const char *desc)
{
	struct psd_conn *c = fz_conn(van, peer_id, desc);

	c->born_ms = psd_now_ms();
	atomic_store(&c->authed, false);
	psd_list_init(&c->link);
	return c;
}

/* Deliver the harness's own control message @m on @c. */
static void fz_deliver_msg(struct psd_conn *c, const Psched__Control *m)
{
	struct psd_hdr h = { .type = PSD_MSG_CONTROL };
	uint8_t buf[2048];

	h.length = psched__control__get_packed_size(m);
	if (h.length > sizeof(buf))
		abort();
	psched__control__pack(m, buf);
	fz_deliver(c, &h, buf);
}

/* The table as the scheduler sends it: servers 1-2, workers 3-4 (no
 * entry for the scheduler, id 0); @your_id is us. */
static void fz_give_table(struct psched_node *n, int your_id)
{
	Psched__NodeInfo ni[4], *nodes[4];
	Psched__NodeTable t = PSCHED__NODE_TABLE__INIT;
	Psched__Control m = PSCHED__CONTROL__INIT;
	unsigned i;

	for (i = 0; i < 4; i++) {
		psched__node_info__init(&ni[i]);
		ni[i].id = (int32_t)i + 1;
		ni[i].role =
			i < 2 ? PSCHED__ROLE__SERVER : PSCHED__ROLE__WORKER;
		ni[i].rank = (int32_t)i % 2;
		ni[i].host = "127.0.0.1";
		ni[i].port = 4001 + i;
		nodes[i] = &ni[i];
	}
	t.n_nodes = 4;
	t.your_id = your_id;
	t.nodes = nodes;
	m.body_case = PSCHED__CONTROL__BODY_TABLE;
	m.table = &t;
	fz_deliver_msg(n->sched, &m);
	if (!n->have_table)
		abort();
}

/* The node's start hook: the van with the postoffice's callbacks, never
 * started (frames come from the fuzzing thread), then the state of
 * fz_mode.  The data connections are made by the harness. */
static int fz_start(struct psched_node *n)
{
	struct psd_van_opts vo = { .ops = n->ops,
				   .max_tensor = n->cfg.max_tensor_bytes,
				   .send_timeout_ms = 1000,
				   .cfg = &n->cfg };
	struct psd_van_cb cb;
	int ret;

	psd_po_van_cb(n, &cb);
	ret = psd_van_create(&vo, &cb, &n->van);
	if (ret)
		return ret;
	n->sched = fz_conn_new(n->van, -1, "scheduler");
	if (fz_mode == 0)
		return psd_auth_start(n->sched, (int32_t)n->cfg.role);
	atomic_store(&n->sched->authed, true);
	if (fz_mode >= 2)
		fz_give_table(n, fz_mode == 3 ? 3 : 1);
	return 0;
}

/* The right proof for a Challenge/Proof whose proof is the byte 0xA5,
 * repacked into @out; false: @m is left as it is. */
static bool fz_fix_proof(struct psched_node *n, struct psd_conn *c,
			 Psched__Control *m, uint8_t *out, size_t *len)
{
	enum psd_auth_kind kind =
		c == n->sched ? PSD_AUTH_REGISTER : PSD_AUTH_HELLO;
	uint8_t proof[PSD_AUTH_PROOF_LEN];
	ProtobufCBinaryData *pb, was;

	if (c->auth_step != 1)
		return false;
	if (m->body_case == PSCHED__CONTROL__BODY_CHALLENGE) {
		pb = &m->challenge->proof;
		if (pb->len != 1 || pb->data[0] != 0xA5 ||
		    m->challenge->nonce.len != PSD_AUTH_NONCE_LEN)
			return false;
		psd_auth_proof(&n->secret, true, kind, c->auth_id,
			       c->nonce_mine, m->challenge->nonce.data, proof);
	} else if (m->body_case == PSCHED__CONTROL__BODY_PROOF) {
		pb = &m->proof->proof;
		if (pb->len != 1 || pb->data[0] != 0xA5)
			return false;
		psd_auth_proof(&n->secret, false, kind, c->auth_id,
			       c->nonce_peer, c->nonce_mine, proof);
	} else {
		return false;
	}
	was = *pb;
	pb->data = proof;
	pb->len = sizeof(proof);
	*len = psched__control__pack(m, out);
	*pb = was; /* the unpacked message's own, freed with it */
	return true;
}

/* The van's part when a connection went away: the closed callback, once. */
static void fz_closed(struct psched_node *n, struct psd_conn *c, int err,
		      bool *gone)
{
	struct psd_van_cb cb;

	if (*gone || !atomic_load(&c->closed))
		return;
	*gone = true;
	psd_po_van_cb(n, &cb);
	cb.closed(cb.arg, c, err);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t setup = size ? data[0] : 0, buf[PSD_HDR_SIZE], fixed[4096];
	struct psd_conn *conns[FZ_NCONN] = { 0 }, *own[FZ_NCONN] = { 0 };
	bool gone[FZ_NCONN] = { 0 };
	const uint8_t *p = data + (size ? 1 : 0), *payload;
	size_t left = size ? size - 1 : 0, flen;
	struct psched_node *n = NULL;
	struct psched_cfg cfg;
	unsigned i, frames = 0, route;
	const char *why;
	struct psd_hdr h;

	/* FUZZ_NODE_LOG=1: the node's log, to see what an input reached. */
	psd_log_level = getenv("FUZZ_NODE_LOG") ? PSD_LOG_DEBUG : -1;
	fz_mode = setup & 3;
	psd_cfg_defaults(&cfg);
	cfg.role = fz_mode == 3 || (fz_mode == 0 && (setup & 4))
			   ? PSCHED_ROLE_WORKER
			   : PSCHED_ROLE_SERVER;
	cfg.num_server = 2;
	cfg.num_worker = 2;
	snprintf(cfg.transport, sizeof(cfg.transport), "tcp");
	snprintf(cfg.root_uri, sizeof(cfg.root_uri), "127.0.0.1");
	snprintf(cfg.job_token, sizeof(cfg.job_token), "%s", FZ_TOKEN);
	cfg.max_tensor_bytes = 1u << 20;
	cfg.request_timeout_ms = 1000;
	if (!fz_server_role.attach) {
		fz_server_role = psd_kvs_role;
		fz_server_role.start = fz_start;
		fz_worker_role = psd_kvw_role;
		fz_worker_role.start = fz_start;
	}
	if (psd_node_create(&cfg,
			    cfg.role == PSCHED_ROLE_WORKER ? &fz_worker_role
							   : &fz_server_role,
			    &n)) {
		fprintf(stderr, "fuzz_node: no node: %s\n", psched_errmsg());
		abort();
	}
	psd_log_level = getenv("FUZZ_NODE_LOG") ? PSD_LOG_DEBUG : -1;
	conns[0] = n->sched;
	for (i = 1; i < FZ_NCONN; i++) {
		if (cfg.role == PSCHED_ROLE_WORKER && fz_mode == 0)
			break; /* no table: no server to dial yet */
		if (cfg.role == PSCHED_ROLE_WORKER) {
			/* As po_connect_servers(): the node's own reference
			 * is p->conn's (psd_po_stop() puts it). */
			struct psd_peer *pe = psd_node_peer(n, (int)i);

			conns[i] = fz_conn_new(n->van, pe->id, pe->desc);
			pe->conn = conns[i];
			if (psd_auth_start(conns[i], n->id))
				abort();
		} else {
			conns[i] = own[i] = fz_conn_new(n->van, -1, "accepted");
		}
	}
	while (left >= PSD_HDR_SIZE && frames++ < FZ_MAX_FRAMES) {
		memcpy(buf, p, PSD_HDR_SIZE);
		p += PSD_HDR_SIZE;
		left -= PSD_HDR_SIZE;
		route = buf[92] % FZ_NCONN;
		memcpy(buf, "PSD1", 4);
		buf[4] = PSD_HDR_VERSION;
		memset(buf + 92, 0, 4);
		if (psd_hdr_decode(buf, cfg.max_tensor_bytes, &h, &why) ||
		    h.length > left)
			break;
		payload = h.length ? p : NULL;
		p += h.length;
		left -= h.length;
		if (!conns[route] || atomic_load(&conns[route]->closed))
			continue;
		if (h.type == PSD_MSG_CONTROL && h.length &&
		    h.length + 64 <= sizeof(fixed)) {
			Psched__Control *m = psched__control__unpack(
				NULL, (size_t)h.length, payload);

			if (m &&
			    fz_fix_proof(n, conns[route], m, fixed, &flen)) {
				h.length = flen;
				payload = fixed;
			}
			if (m)
				psched__control__free_unpacked(m, NULL);
		}
		fz_deliver(conns[route], &h, payload);
		fz_closed(n, conns[route], -EPROTO, &gone[route]);
	}
	if (setup & 8)
		for (i = 0; i < FZ_NCONN; i++)
			if (conns[i]) {
				psd_conn_close(conns[i]);
				fz_closed(n, conns[i], -ECONNRESET, &gone[i]);
			}
	/* No finalize round trip at destroy: nobody would answer. */
	pthread_mutex_lock(&n->lock);
	n->shutdown = true;
	pthread_mutex_unlock(&n->lock);
	/* What psd_van_destroy() does to the connections still open (these
	 * are not in the van's list). */
	for (i = 0; i < FZ_NCONN; i++)
		if (conns[i]) {
			psd_conn_close(conns[i]);
			fz_closed(n, conns[i], PSCHED_ESHUTDOWN, &gone[i]);
		}
	psched_node_destroy(n);
	for (i = 0; i < FZ_NCONN; i++)
		psd_conn_put(own[i]);
	return 0;
}
