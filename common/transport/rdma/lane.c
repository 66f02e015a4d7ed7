// SPDX-License-Identifier: MIT
/*
 * RDMA transport, the lane: a second RC queue pair per connection that
 * carries the first part of each large RDMA write, posted by the device's
 * lane thread while the sender posts the rest on the connection's own QP.
 *
 * Why.  Soft-RoCE (rxe) does a whole transfer -- packets, CRCs, the copy
 * into the peer's memory -- inside ibv_post_send(), in the posting
 * thread, one QP at a time.  One sender thread on one QP is then one CPU
 * of work: psched's 64 KiB pushes spent ~95% of the sender's time inside
 * ibv_post_send().  Two QPs posted by two threads put both CPUs on it (two
 * ib_write_bw pairs at once move ~1.9x one pair in the test VM).  The
 * hand-off costs a wake-up of the lane thread and a second completion on
 * each side, which small writes do not earn back: in the VM (ps-bench
 * push, 40 keys, bench/rdma-ab.sh, lane against PS_RDMA_LANE_MIN=0, of
 * ib_write_bw) 1 MiB 1.55 against 0.93, 256 KiB 1.13 against 0.91,
 * 128 KiB 0.86 against 0.83, 64 KiB 0.55 against 0.70.  Hence 256 KiB
 * by default.  On a NIC the post is a doorbell and the hand-off only adds
 * latency, so the lane is on by default only on rxe (siw, also software,
 * refuses a QP brought to RTS without its TCP socket).
 *
 * Wire.  A write of @payload >= lane_min bytes is split at half of the
 * payload: bytes [0, half) go on the lane as an RDMA write with immediate,
 * the same immediate as the rest, [half, end) (and a cached write's
 * header) on the main QP as before.  The two QPs are not ordered with
 * each other, so the receiver, at the main part's immediate, finds the
 * message shorter than it expects (byte_len) and takes the lane part
 * too: the oldest lane part not yet taken (the lane is one RC QP, so its
 * parts arrive in the order the messages were sent), which must carry
 * the same immediate and the missing byte count.  If it is not in yet,
 * delivery stops there (RDMT_LANE_LATER) until it is: the message is
 * delivered when both parts are in memory, and messages stay in order.
 * Lane receives are buffer-less (a write with immediate consumes a receive
 * request, not its buffer); the receiver keeps recv_depth of them posted,
 * reposted when a part is taken, before the main part's credit returns,
 * so the peer's main-QP credits bound its lane parts too.
 *
 * Setup.  Each side creates the lane QP with the connection's QP (same
 * PD and CQ) and names it (qpn, starting PSN) in the connect private
 * data.  The accepting side moves its lane to RTS before it accepts,
 * with the attributes rdma_cm gives for the connection
 * (rdma_init_qp_attr()) but the peer's lane as destination; the
 * connecting side does the same once established.  A side writes on its
 * lane only when the peer's lane is ready: the connecting side at once
 * (the acceptor's lane was ready before it accepted), the accepting side
 * after the first message from the peer (sent after the peer's lane was
 * set up).  No lane (creation failed, or the peer has none): every write
 * goes on the main QP as before.
 *
 * Batches.  A split write's batch (send.c) waits for both parts:
 * wb_parts counts the writes not completed.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rdma_internal.h"

/* dev->lock held: one write of batch @wb completed (or is given up). */
void psd_rdmt_wb_part(struct rdmt_conn *rc, unsigned wb)
{
	if (wb >= RDMT_WB || !rc->wb_busy[wb])
		return;
	if (rc->wb_parts[wb] > 1) {
		rc->wb_parts[wb]--;
		return;
	}
	psd_rdmt_wb_done(rc, wb);
}

/* A lane QP's queues: a write per batch (+1), recv_depth receives. */
#define RDMT_LANE_SEND_WR (RDMT_WB + 1)

/* Completions a lane QP may have in the shared CQ at once. */
static unsigned rdmt_lane_cq_need(const struct rdmt_dev *d)
{
	return RDMT_LANE_SEND_WR + d->k.recv_depth;
}

int psd_rdmt_lane_create(struct rdmt_conn *rc)
{
	struct rdmt_dev *d = rc->dev;
	struct ibv_qp_init_attr qa = {
		.send_cq = d->cq,
		.recv_cq = d->cq,
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = RDMT_LANE_SEND_WR,
			 .max_recv_wr = d->k.recv_depth,
			 .max_send_sge = RDMT_MAX_IOV + 1,
			 .max_recv_sge = 1 },
	};

	if (!d->k.lane_min)
		return 0;
	rc->lane_rxq = calloc(d->k.recv_depth, sizeof(*rc->lane_rxq));
	if (!rc->lane_rxq)
		return -ENOMEM;
	/* No room: no lane, the main QP carries it all. */
	if (!psd_rdmt_cq_take(d, rdmt_lane_cq_need(d)))
		return 0;
	rc->lane_qp = ibv_create_qp(d->pd, &qa);
	if (!rc->lane_qp) {
		psd_info("rdma: no lane queue pair for %s (%s): every write "
			 "goes on one",
			 rc->base.peer, strerror(errno));
		psd_rdmt_cq_give(d, rdmt_lane_cq_need(d));
		return 0;
	}
	rc->lane_psn =
		((uint32_t)getpid() * 2654435761u ^ rc->lane_qp->qp_num) &
		0xffffff;
	return 0;
}

/* Move the lane QP to @state with rdma_cm's attributes for the
 * connection, the peer's lane as destination. */
static int rdmt_lane_modify(struct rdmt_conn *rc, enum ibv_qp_state state,
			    uint32_t qpn, uint32_t psn)
{
	struct ibv_qp_attr a;
	int mask = 0;

	memset(&a, 0, sizeof(a));
	a.qp_state = state;
	if (rdma_init_qp_attr(rc->id, &a, &mask))
		return psd_neg_errno();
	if (state == IBV_QPS_RTR) {
		a.dest_qp_num = qpn;
		a.rq_psn = psn;
	} else if (state == IBV_QPS_RTS) {
		a.sq_psn = rc->lane_psn;
	}
	return -ibv_modify_qp(rc->lane_qp, &a, mask);
}

/* dev->lock held: post one (buffer-less) lane receive. */
static int rdmt_lane_post_recv(struct rdmt_conn *rc)
{
	struct ibv_recv_wr wr = { 0 }, *bad;
	int ret;

	wr.wr_id = psd_rdmt_wr_id(rc, RDMT_WR_LANE_RECV, 0);
	ret = -ibv_post_recv(rc->lane_qp, &wr, &bad);
	if (!ret)
		rc->lane_rx_posted++;
	return ret;
}

int psd_rdmt_lane_connect(struct rdmt_conn *rc, uint32_t qpn, uint32_t psn)
{
	struct rdmt_dev *d = rc->dev;
	unsigned i;
	int ret;

	if (!rc->lane_qp || !qpn)
		return 0;
	ret = rdmt_lane_modify(rc, IBV_QPS_INIT, 0, 0);
	if (!ret)
		ret = rdmt_lane_modify(rc, IBV_QPS_RTR, qpn, psn);
	if (!ret)
		ret = rdmt_lane_modify(rc, IBV_QPS_RTS, 0, 0);
	if (ret)
		return psd_set_errmsg(ret,
				      "rdma: cannot connect the lane queue "
				      "pair with %s: %s (PS_RDMA_LANE_MIN=0 "
				      "turns the lane off)",
				      rc->base.peer, strerror(-ret));
	pthread_mutex_lock(&d->lock);
	for (i = 0; !ret && i < d->k.recv_depth; i++)
		ret = rdmt_lane_post_recv(rc);
	pthread_mutex_unlock(&d->lock);
	return ret;
}

/* dev->lock held (progress thread): a lane part arrived. */
void psd_rdmt_lane_on_recv(struct rdmt_conn *rc, const struct ibv_wc *wc)
{
	struct rdmt_lane_ent *e;

	rc->lane_rx_posted--;
	if (wc->opcode != IBV_WC_RECV_RDMA_WITH_IMM ||
	    rc->lane_rx_len >= rc->dev->k.recv_depth) {
		psd_err("rdma: dropping connection from %s: %s on the lane",
			rc->base.peer,
			wc->opcode != IBV_WC_RECV_RDMA_WITH_IMM
				? "a message"
				: "more writes than receive credits");
		psd_rdmt_set_err(rc, -EPROTO);
		return;
	}
	e = &rc->lane_rxq[(rc->lane_rx_head + rc->lane_rx_len++) %
			  rc->dev->k.recv_depth];
	e->imm = ntohl(wc->imm_data);
	e->len = wc->byte_len;
	psd_rdmt_wake_van(rc);
}

/*
 * Van thread: a write with immediate @imm brought @len bytes on the main
 * QP of a message of @want bytes.  0 with *@total the bytes of the message
 * in memory (the lane part taken when @len is short), RDMT_LANE_LATER
 * when the lane part is not in yet, or an error.
 */
int psd_rdmt_lane_join(struct rdmt_conn *rc, uint32_t imm, uint32_t len,
		       uint64_t want, uint32_t *total)
{
	struct rdmt_dev *d = rc->dev;
	struct rdmt_lane_ent e;
	int ret = 0;

	*total = len;
	/* Whole, or no lane to complete it: the caller checks the length. */
	if (len >= want || !rc->lane_up)
		return 0;
	pthread_mutex_lock(&d->lock);
	if (!rc->lane_rx_len) {
		ret = rc->err ?: RDMT_LANE_LATER;
		pthread_mutex_unlock(&d->lock);
		return ret;
	}
	e = rc->lane_rxq[rc->lane_rx_head];
	rc->lane_rx_head = (rc->lane_rx_head + 1) % d->k.recv_depth;
	rc->lane_rx_len--;
	if (!rc->err)
		ret = rdmt_lane_post_recv(rc);
	pthread_mutex_unlock(&d->lock);
	if (ret)
		return ret;
	if (e.imm != imm || (uint64_t)e.len + len != want) {
		psd_err("rdma: dropping connection from %s: a write of %u "
			"bytes with immediate 0x%08x does not complete one of "
			"%u bytes with immediate 0x%08x to %llu",
			rc->base.peer, e.len, e.imm, len, imm,
			(unsigned long long)want);
		return -EPROTO;
	}
	*total = (uint32_t)want;
	return 0;
}

/*
 * dev->lock held (the sender, in rdmt_post_writes()): if the write of
 * @sge (@payload bytes of payload, then perhaps a header) to
 * @raddr/@rkey goes split, queue its first part for the lane thread as
 * a part of batch @wb, fill @rest/@nrest/@rest_raddr with what the
 * caller posts on the main QP, and return true.
 */
bool psd_rdmt_lane_split(struct rdmt_conn *rc, const struct ibv_sge *sge,
			 int ns, uint64_t payload, unsigned wb, uint64_t raddr,
			 uint32_t rkey, uint32_t imm, struct ibv_sge *rest,
			 int *nrest, uint64_t *rest_raddr)
{
	struct rdmt_dev *d = rc->dev;
	struct rdmt_lane_job *j;
	uint64_t half, left;
	int i;

	if (!rc->lane_tx || !d->k.lane_min || payload < d->k.lane_min ||
	    rc->lane_njobs >= RDMT_WB)
		return false;
	half = (payload / 2) & ~(uint64_t)63;
	if (!half)
		return false;
	j = &rc->lane_jobs[(rc->lane_head + rc->lane_njobs) % RDMT_WB];
	j->wb = wb;
	j->imm = imm;
	j->raddr = raddr;
	j->rkey = rkey;
	j->ns = 0;
	*nrest = 0;
	left = half;
	for (i = 0; i < ns; i++) {
		struct ibv_sge s = sge[i];

		if (left) {
			uint32_t k =
				s.length < left ? s.length : (uint32_t)left;

			j->sge[j->ns] = s;
			j->sge[j->ns].length = k;
			j->ns++;
			left -= k;
			s.addr += k;
			s.length -= k;
			if (!s.length)
				continue;
		}
		rest[(*nrest)++] = s;
	}
	*rest_raddr = raddr + half;
	rc->lane_njobs++;
	rc->wb_parts[wb] = 2;
	rc->tx_outstanding++; /* the lane write, from now */
	rc->n_lane++;
	atomic_fetch_add(&psd_rdmt_st_lane, 1);
	if (!rc->lane_listed) {
		psd_list_add_tail(&d->lane_conns, &rc->lane_link);
		rc->lane_listed = true;
	}
	pthread_cond_signal(&d->lane_cond);
	return true;
}

static void *rdmt_lane_thread(void *arg)
{
	struct rdmt_dev *d = arg;
	struct ibv_send_wr wr, *bad;
	struct rdmt_lane_job j;
	struct rdmt_conn *rc;
	int ret;

	pthread_mutex_lock(&d->lock);
	while (!d->lane_stop) {
		if (psd_list_empty(&d->lane_conns)) {
			pthread_cond_wait(&d->lane_cond, &d->lock);
			continue;
		}
		rc = psd_container_of(d->lane_conns.next, struct rdmt_conn,
				      lane_link);
		j = rc->lane_jobs[rc->lane_head];
		rc->lane_head = (rc->lane_head + 1) % RDMT_WB;
		/* Round robin: a connection with more goes to the back. */
		psd_list_del(&rc->lane_link);
		if (--rc->lane_njobs)
			psd_list_add_tail(&d->lane_conns, &rc->lane_link);
		else
			rc->lane_listed = false;
		if (rc->err || rc->lane_dead) {
			/* Dead since it was queued: its batch is given up. */
			rc->tx_outstanding--;
			psd_rdmt_wb_part(rc, j.wb);
			continue;
		}
		memset(&wr, 0, sizeof(wr));
		wr.wr_id = psd_rdmt_wr_id(rc, RDMT_WR_LANE_WRITE, j.wb);
		wr.sg_list = j.sge;
		wr.num_sge = j.ns;
		wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
		wr.send_flags = IBV_SEND_SIGNALED;
		wr.imm_data = htonl(j.imm);
		wr.wr.rdma.remote_addr = j.raddr;
		wr.wr.rdma.rkey = j.rkey;
		/* As the sender: rxe moves the bytes inside the post, so
		 * not under dev->lock.  fini waits for lane_busy. */
		rc->lane_busy = true;
		pthread_mutex_unlock(&d->lock);
		ret = -ibv_post_send(rc->lane_qp, &wr, &bad);
		pthread_mutex_lock(&d->lock);
		rc->lane_busy = false;
		pthread_cond_broadcast(&rc->cond);
		if (ret) {
			rc->tx_outstanding--;
			psd_rdmt_wb_part(rc, j.wb);
			if (!rc->err)
				psd_err("rdma: lane write to %s failed: %s",
					rc->base.peer, strerror(-ret));
			psd_rdmt_set_err(rc, ret);
		}
	}
	pthread_mutex_unlock(&d->lock);
	return NULL;
}

int psd_rdmt_lane_start(struct rdmt_dev *d)
{
	int ret;

	if (!d->k.lane_min)
		return 0;
	ret = pthread_create(&d->lane_thread, NULL, rdmt_lane_thread, d);
	if (ret) {
		d->lane_thread = 0;
		return -ret;
	}
	pthread_setname_np(d->lane_thread, "ps-rdma-lane");
	return 0;
}

void psd_rdmt_lane_stop(struct rdmt_dev *d)
{
	if (d->lane_thread) {
		pthread_mutex_lock(&d->lock);
		d->lane_stop = true;
		pthread_cond_broadcast(&d->lane_cond);
		pthread_mutex_unlock(&d->lock);
		pthread_join(d->lane_thread, NULL);
		d->lane_thread = 0;
	}
}

/*
 * dev->lock held (psd_rdmt_set_err()): the connection is dead.  The lane
 * goes with it at once, not when the connection is finally dropped: its
 * queued parts are dropped (their batches given up), and the QP goes to
 * error, so that a part already posted is flushed and nothing more lands
 * in memory the peer may have handed back to its application (a failed
 * pull's buffer).  The lane thread may be inside a post of ours: that
 * one completes or flushes.
 */
void psd_rdmt_lane_abort(struct rdmt_conn *rc)
{
	struct ibv_qp_attr qa = { .qp_state = IBV_QPS_ERR };

	if (!rc->lane_qp || rc->lane_dead)
		return;
	rc->lane_dead = true;
	rc->lane_tx = false;
	if (rc->lane_listed) {
		psd_list_del(&rc->lane_link);
		rc->lane_listed = false;
	}
	while (rc->lane_njobs) {
		rc->lane_njobs--;
		rc->tx_outstanding--;
		psd_rdmt_wb_part(rc, rc->lane_jobs[rc->lane_head].wb);
		rc->lane_head = (rc->lane_head + 1) % RDMT_WB;
	}
	ibv_modify_qp(rc->lane_qp, &qa, IBV_QP_STATE);
}

/*
 * Before the QPs are drained: abort the lane and wait until the lane
 * thread is not posting one of ours, so that nothing touches the lane QP
 * after this.  No give-up: a post is bounded (soft-RoCE moves at most one
 * message's half inside it), and going on would free what it uses.
 */
void psd_rdmt_lane_fini(struct rdmt_conn *rc)
{
	struct rdmt_dev *d = rc->dev;
	struct timespec dl;
	unsigned waited = 0;

	if (!rc->lane_qp)
		return;
	pthread_mutex_lock(&d->lock);
	psd_rdmt_lane_abort(rc);
	while (rc->lane_busy) {
		psd_deadline(&dl, 10000);
		if (pthread_cond_timedwait(&rc->cond, &d->lock, &dl) ==
			    ETIMEDOUT &&
		    rc->lane_busy)
			psd_warn("rdma: closing the connection with %s: the "
				 "lane thread is still posting a write to it "
				 "after %u s; waiting",
				 rc->base.peer, waited += 10);
	}
	pthread_mutex_unlock(&d->lock);
}

/* After the drain: the lane QP goes. */
void psd_rdmt_lane_destroy(struct rdmt_conn *rc)
{
	struct rdmt_dev *d = rc->dev;

	if (rc->lane_qp) {
		ibv_destroy_qp(rc->lane_qp);
		rc->lane_qp = NULL;
		psd_rdmt_cq_give(d, rdmt_lane_cq_need(d));
	}
	free(rc->lane_rxq);
	rc->lane_rxq = NULL;
}
