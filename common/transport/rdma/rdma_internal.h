/* SPDX-License-Identifier: MIT */
/*
 * RDMA transport: RC queue pairs set up with rdma_cm, for ConnectX-class
 * RoCE / InfiniBand and the kernel's soft-RoCE (rxe).
 *
 * Threads.  One progress thread per process (per device) owns the single
 * completion channel and CQ that every QP shares, plus each connection's
 * rdma_cm event channel.  It busy-polls the CQ for PS_RDMA_SPIN_US after
 * the last completion, then arms the CQ and sleeps in epoll, so an idle
 * node burns no CPU.  It never calls into the van: for every incoming
 * message it appends the receive buffer to the connection's in-order
 * queue and bumps the connection's eventfd, which is the c->fd the van
 * polls.  The van thread then runs ->progress(), which makes the two
 * upcalls (psd_van_rx_header(), psd_van_rx_msg()) strictly in message
 * order, exactly as the TCP transport does.
 *
 * Why a separate thread: ->send() is synchronous and is called from the
 * van thread too (a server answers pulls there).  Everything a send waits
 * for -- a free send slot, send credits, the receiver's clear-to-send, the
 * completion of its RDMA write -- is reaped by the progress thread and
 * handed to the sender through a condition variable, so a send never
 * depends on its own thread running ->progress().  A sender thread
 * posts its SENDs and writes with dev->lock released (soft-RoCE runs
 * the whole transfer inside ibv_post_send(), and the progress thread
 * must reap completions meanwhile): what the completion or the peer's
 * answer touches is set before the post.  A send does depend on
 * the peer's van thread answering a large message's header, exactly as a
 * large TCP send depends on the peer's van thread draining the socket.
 *
 * Wire protocol.  Every SEND starts with struct rdmt_wire (24 bytes).
 *  EAGER  wire + psd header + the first payload bytes.  Messages that fit
 *         one buffer (PS_RDMA_BUF_BYTES) are copied into a pre-registered
 *         send slot (inline when tiny) and the send returns at once.
 *  CONT   wire + more payload bytes (copy fallback for large messages).
 *  RTS    wire + psd header of a large message.  The receiver's van thread
 *         asks the consumer for the destination (rx_header), registers it
 *         (registration cache) and answers
 *  CTS    wire with the destination's address and rkey; the sender then
 *         RDMA-writes the payload straight from the caller's buffer into
 *         the destination (pull answers land in the worker's buffer, pushes
 *         in the server's merge buffer) and ends with a write-with-
 *         immediate whose immediate names the request (the RTS cookie).
 *         CTS can also say "discard" or "send it as CONT copies" (the
 *         receiver could not register memory).  A response's send waits
 *         for its writes to complete; a request's send (push, pushpull,
 *         init) returns once they are posted, since the KV API leaves
 *         its buffers alone until the answer (see transport.h): the
 *         next RTS then follows the writes on the wire, so the receiver
 *         finds it queued right behind the write-with-immediate.
 *  CREDIT wire only: returns receive credits when no other traffic does.
 *  GRANT  wire + key, offset, length (le64): the rendezvous cache, below
 *         (status: give, release, or revoke).
 *  RETURN wire: a revoked grant handed back unused (rendezvous cache).
 * Receive credits: each side pre-posts PS_RDMA_RECV_DEPTH buffers (+2
 * spare for CREDIT messages) and tells the peer in the connect private
 * data; a sender spends one credit per SEND or write-with-immediate and
 * stops at zero, so a slow receiver stalls the sender instead of causing
 * RNR retries.  The receiver returns credits after its van thread has
 * consumed a buffer, piggybacked on every message or by CREDIT: once
 * PS_RDMA_RECV_DEPTH/4 are owed, or at once when the peer is down to the
 * reserved credit (counted in peer_credits), since its van thread may
 * wait for a credit to post a CTS or GRANT while this side's van waits
 * for that very message and so sends nothing to piggyback on.
 *
 * Rendezvous cache.  After a message of (key, offset, length) came by
 * RTS/CTS into host memory, the receiver allocates and registers a
 * landing buffer for that range (transport-owned: the payload, then
 * RDMT_LAND_HDR bytes of room for the header) and GRANTs it to the sender:
 * slot, generation (in cookie), address and rkey (status 0).  The next
 * message of that range from that peer needs no RTS/CTS: the sender
 * RDMA-writes payload and psd header (gathered, one write) with immediate
 * RDMT_IMM_LAND | gen << 16 | slot, and (a request) returns, or (an
 * answer) waits for the write to complete.  The receiver's van thread
 * checks the immediate against its grant (slot granted, same generation,
 * header length), decodes the header from the buffer and delivers the
 * message as any other: rx_header picks the destination (rx_direct is
 * false: the CPU copies out of the landing buffer, so GPU memory is never
 * chosen); when the consumer did not choose one (the van's scratch
 * buffer, e.g. a server summing several workers) the payload is handed
 * over in the landing buffer itself, else it is copied once into the
 * chosen buffer.  Then it grants the slot again with the next generation,
 * or releases it (status 1) and frees it.
 * A re-grant of a slot the peer knows needs only (slot, generation): it
 * rides in the regrant field of whatever SEND goes to the peer next, when
 * one goes while the message is delivered (the answer to a push, copied
 * out of the landing buffer before the upcall); else it goes as a GRANT.
 * A grant is one write: the sender marks it USED and the next message
 * of the range waits for the next grant or the release (RTS/CTS then) --
 * no new dependency: an RTS would queue behind that write too;
 * the receiver frees a buffer only after a write into it arrived (never
 * while granted), and only when the connection is gone otherwise (after
 * the QP is destroyed), so a cached write can never land in freed or
 * reused memory.  Invalidation needs no round trip: the landing buffer
 * belongs to the transport, so re-registration of application memory,
 * re-init of a key, a config switch (new partition ranges: new keys of
 * the cache, and the header inside is checked by the consumer like any
 * other) or a failed peer (the connection and its buffers go) cannot make
 * a grant point at memory that changed meaning.  Memory: at most
 * RDMT_LAND_CAP (and a quarter of PS_RDMA_MR_BUDGET; 0 turns the cache
 * off) per connection, messages up to RDMT_LAND_MAX_MSG.  Over the cap
 * the least recently granted range is revoked: GRANT with status revoke;
 * the sender's progress thread answers RETURN if it has not used the
 * grant (and forgets it first), else its write is on the way and the
 * receiver releases the buffer after it.  So a range no longer used
 * (config switch, re-init) gives its room back, and still no buffer is
 * freed while the peer may write into it.  RETURN, sent by the progress
 * thread, never spends the reserved credit.
 * GPUDirect: a receiver whose consumer chose device memory (rx_dev) gets
 * no grant for that range, so those keep the NIC writing device memory;
 * a sender's device payload may use a grant (the NIC reads it, the
 * receiver's CPU copies it out of host memory).
 *
 * Registration cache: LRU of MRs by address range with a byte budget
 * (PS_RDMA_MR_BUDGET); unused MRs are deregistered on eviction.  A failed
 * registration (usually the locked-memory limit) is logged once with the
 * knobs to change and the message goes through the copy path instead.
 * Caveat: memory that is freed back to the OS and mapped again at the same
 * address while still cached would keep the old pages; PS_RDMA_MR_BUDGET=0
 * registers per message if an application does that.
 *
 * GPUDirect RDMA (PS_GPU_DIRECT): ->send_dev() sends a payload in GPU
 * memory always by RTS/CTS and RDMA writes from its registration (never
 * EAGER or CONT, which the CPU would copy); a CTS asking for copies then
 * drops the connection.  A receiver sets psd_conn.rx_direct for RTS
 * messages only, so a consumer picks device memory only when the NIC
 * writes it; if that cannot be registered, the payload is received by
 * CONT copies into the scratch buffer instead (recv.c).  Device memory
 * goes through the same registration cache (ibv_reg_mr works on it with
 * nvidia_peermem loaded).
 *
 * Knobs (PS_RDMA_*, --rdma-*) come from the node's struct psched_cfg
 * through the van (psd_van_knobs()); the first connection's van sets
 * them for the process's device.
 *
 * Files: dev.c (device, knobs, progress thread, probe), mr.c (registration
 * cache), cm.c (rdma_cm connection setup, ops table), send.c, recv.c.
 * Compiled only when rdma-core is installed (Makefile: HAVE_RDMA); the
 * stubs for other builds are static inlines in transport.h.
 *
 * Names: this module's prefix is rdmt_ (psd_rdmt_ across its files), not
 * rdma_: rdma_ and RDMA_ are librdmacm's own prefixes (rdma_post_recv(),
 * rdma_connect(), RDMA_PS_TCP...), and a static rdma_post_recv() collided
 * with rdma_verbs.h's inline of that name.
 */
#ifndef PSCHED_COMMON_TRANSPORT_RDMA_RDMA_INTERNAL_H
#define PSCHED_COMMON_TRANSPORT_RDMA_RDMA_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/epoll.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "transport/transport.h"

#include "land_tab.h"

#define RDMT_MAGIC	0x44525350u /* "PSRD" */
#define RDMT_VERSION	4u	    /* 2: GRANT; 3: regrant; 4: the lane QP */
#define RDMT_MAX_IOV	8
#define RDMT_CTL_SLOTS	4
#define RDMT_SPARE_RECV 2 /* for CREDIT messages, never counted */
#define RDMT_RESERVE	1 /* credits data may not use: left for CTS */
#define RDMT_MAX_CONNS	4096
#define RDMT_RX_BUDGET	8	 /* messages per ->progress() call */
#define RDMT_WB		8	 /* RDMA write batches in flight */
#define RDMT_WB_LAST	0x800000 /* wr_id slot flag: last WR of a batch */

enum rdmt_op {
	RDMT_OP_EAGER = 1,
	RDMT_OP_CONT = 2,
	RDMT_OP_RTS = 3,
	RDMT_OP_CTS = 4,
	RDMT_OP_CREDIT = 5,
	RDMT_OP_GRANT = 6,
	RDMT_OP_RETURN = 7,
};

/* GRANT status */
#define RDMT_GRANT_GIVE	   0
#define RDMT_GRANT_RELEASE 1
#define RDMT_GRANT_REVOKE  2
#define RDMT_GRANT_SIZE	   (RDMT_WIRE_SIZE + 24)

/* CTS status */
#define RDMT_CTS_WRITE	 0
#define RDMT_CTS_DISCARD 1
#define RDMT_CTS_COPY	 2

/* Little-endian on the wire. */
struct rdmt_wire {
	uint8_t op;
	uint8_t status; /* CTS */
	uint16_t credits;
	uint32_t cookie;  /* RTS/CTS: names the large message */
	uint64_t addr;	  /* CTS */
	uint32_t rkey;	  /* CTS */
	uint32_t regrant; /* any SEND: slot | gen << 16 granted again, or 0 */
};

#define RDMT_WIRE_SIZE sizeof(struct rdmt_wire)

/* Connect / accept private data. */
struct rdmt_cm_priv {
	uint32_t magic;
	uint16_t version;
	uint16_t recv_depth; /* credits the peer may spend */
	uint32_t buf_bytes;  /* size of each receive buffer */
	int32_t node_id;     /* sender's node id, -1 before the table */
	uint32_t pid;
	uint32_t lane_qpn; /* the lane QP (lane.c), 0 = none */
	uint32_t lane_psn;
};

/* wr_id: [gen:16][conn:16][kind:8][slot:24] */
enum rdmt_wr_kind {
	RDMT_WR_RECV = 1,
	RDMT_WR_SEND = 2, /* data slot */
	RDMT_WR_CTL = 3,  /* control slot (CTS, CREDIT) */
	RDMT_WR_WRITE = 4,
	RDMT_WR_LANE_RECV = 5,	/* lane QP: the first part of a split write */
	RDMT_WR_LANE_WRITE = 6, /* ... posted by the lane thread */
};

struct rdmt_knobs {
	unsigned recv_depth;
	unsigned send_depth;
	unsigned buf_bytes;
	unsigned inline_bytes;
	unsigned cq_depth;
	unsigned spin_us;
	bool spin_set; /* spin_us given: keep it on rxe/siw too */
	uint64_t mr_budget;
	unsigned port;
	int gid_index;
	char device[64];
	bool fail_reg; /* test hook: pretend every payload registration fails */
	uint64_t lane_min; /* split writes from this many bytes; 0: no lane */
	bool lane_set;	   /* lane_min given: kept on hardware too */
};

struct rdmt_mr {
	struct psd_list lru; /* d->mrs, most recent first */
	uintptr_t start;
	uintptr_t end;
	struct ibv_mr *mr;
	int refs;
	bool cached;
};

struct rdmt_conn;

struct rdmt_dev {
	pthread_mutex_t lock; /* guards every rdmt_conn's shared state */
	struct ibv_context *verbs;
	struct ibv_pd *pd;
	struct ibv_comp_channel *ch;
	struct ibv_cq *cq;
	unsigned cq_used;
	int epfd;
	int wakefd;
	pthread_t thread;
	atomic_bool stop; /* read by the progress thread unlocked */
	int refs;	  /* guarded by rdmt_glock */
	struct rdmt_conn *conns[RDMT_MAX_CONNS];
	uint16_t gens[RDMT_MAX_CONNS];
	struct rdmt_knobs k;

	/* The lane thread (lane.c): posts the first part of split writes
	 * on the connections in @lane_conns (dev->lock). */
	pthread_t lane_thread;
	pthread_cond_t lane_cond;
	bool lane_stop;
	struct psd_list lane_conns;

	pthread_mutex_t mr_lock;
	struct psd_list mrs;
	uint64_t mr_bytes;
	bool reg_warned;
};

/* A part of a split write the lane thread is to post. */
struct rdmt_lane_job {
	unsigned wb;
	uint32_t imm;
	uint64_t raddr;
	uint32_t rkey;
	int ns;
	struct ibv_sge sge[RDMT_MAX_IOV + 1];
};

/* A lane part that arrived (receiver). */
struct rdmt_lane_ent {
	uint32_t imm;
	uint32_t len;
};

struct rdmt_rxq_ent {
	uint32_t slot;
	uint32_t len;
	bool imm;
	uint32_t imm_data;
};

enum rdmt_rx_state {
	RDMT_RX_IDLE = 0,
	RDMT_RX_COPY,  /* collecting CONT parts into dst */
	RDMT_RX_WRITE, /* waiting for the write-with-immediate */
};

struct rdmt_conn {
	struct psd_conn base;
	struct rdmt_dev *dev;
	struct rdma_event_channel *cmch;
	struct rdma_cm_id *id;
	struct ibv_qp *qp;
	unsigned idx; /* in dev->conns; 0 = not in the table */
	uint16_t gen;
	bool in_epoll;
	bool accepted;
	pthread_cond_t cond; /* with dev->lock */

	/* All below guarded by dev->lock. */
	bool established;
	int err; /* sticky: the connection is dead */
	unsigned max_inline;
	unsigned recv_cnt; /* recv_depth + spare */
	uint8_t *rxbuf;
	struct ibv_mr *rxmr;
	unsigned rx_posted;
	unsigned send_cnt; /* data slots + control slots */
	uint8_t *txbuf;
	struct ibv_mr *txmr;
	unsigned *free_data; /* stack of free data slot numbers */
	unsigned nfree_data;
	unsigned free_ctl[RDMT_CTL_SLOTS];
	unsigned nfree_ctl;
	unsigned tx_outstanding; /* signaled WRs not yet completed */
	unsigned tx_credits;	 /* peer receive buffers we may use */
	unsigned rx_unannounced; /* re-posted buffers not yet announced */
	unsigned peer_credits;	 /* credits the peer holds, as we count */
	unsigned credit_thresh;
	bool credit_inflight;
	unsigned peer_buf;

	/* receive queue filled by the progress thread, ring of recv_cnt */
	struct rdmt_rxq_ent *rxq;
	unsigned rxq_head;
	unsigned rxq_len;

	/* sender side of a large message (one at a time: send_lock) */
	uint32_t tx_cookie;
	bool cts_ready;
	uint8_t cts_status;
	uint64_t cts_addr;
	uint32_t cts_rkey;
	/* RDMA write batches in flight and the MRs they read from */
	struct rdmt_mr *wb_mrs[RDMT_WB][RDMT_MAX_IOV];
	bool wb_busy[RDMT_WB];
	uint8_t wb_parts[RDMT_WB]; /* writes of the batch not completed */
	unsigned wb_next;
	uint64_t tx_key;

	/* The lane (lane.c): a second QP that carries the first part of
	 * large writes, posted by the device's lane thread, so that two
	 * threads drive the transfer (dev->lock unless said). */
	struct ibv_qp *lane_qp;
	uint32_t lane_psn;
	bool lane_up; /* our lane is connected to the peer's */
	bool lane_tx; /* the peer's lane takes writes now */
	uint32_t lane_peer_qpn, lane_peer_psn;	 /* from the connect data */
	struct rdmt_lane_job lane_jobs[RDMT_WB]; /* FIFO */
	unsigned lane_head, lane_njobs;
	struct psd_list lane_link; /* in dev->lane_conns while jobs wait */
	bool lane_listed;
	bool lane_busy; /* the lane thread is posting one of ours */
	bool lane_dead; /* aborted: in error, nothing more is posted */
	struct rdmt_lane_ent *lane_rxq; /* ring of recv_depth */
	unsigned lane_rx_head, lane_rx_len, lane_rx_posted;
	uint64_t n_lane; /* messages sent split */

	/* rendezvous cache: the peer's grants (dev->lock) */
	struct rdmt_grant_tab grants;
	unsigned nreturn;  /* grants in state RETURN */
	uint64_t n_cached; /* messages sent by a cached write */
	uint64_t n_rndv;   /* ... by RTS/CTS */
	uint64_t n_landed; /* received by a cached write (van thread) */

	/* receiver state, van thread only */
	struct rdmt_land_tab land; /* our grants to the peer */
	uint32_t regrant; /* slot | gen << 16 for the next SEND; dev->lock */
	pthread_t regrant_by; /* the (van) thread that set it */
	bool rx_grant;	      /* grant the range once this RTS is in */
	enum rdmt_rx_state rx_state;
	struct psd_hdr rx_hdr;
	uint8_t *rx_dst;
	uint64_t rx_got;
	uint32_t rx_cookie;
	struct rdmt_mr *rx_mr;
};

/* Counters for tests and logs (dev.c). */
extern atomic_uint_fast64_t psd_rdmt_st_regs, psd_rdmt_st_evicts,
	psd_rdmt_st_rndv, psd_rdmt_st_eager, psd_rdmt_st_copy,
	psd_rdmt_st_reg_fail, psd_rdmt_st_cached, psd_rdmt_st_regrants,
	psd_rdmt_st_grants, psd_rdmt_st_lane;

static inline struct rdmt_conn *to_rdmt(struct psd_conn *c)
{
	return psd_container_of(c, struct rdmt_conn, base);
}

/* dev.c */
bool psd_rdmt_cq_take(struct rdmt_dev *d, unsigned n);
void psd_rdmt_cq_give(struct rdmt_dev *d, unsigned n);
uint64_t psd_rdmt_wr_id(struct rdmt_conn *rc, unsigned kind, unsigned slot);
void psd_rdmt_wake_van(struct rdmt_conn *rc);
void psd_rdmt_set_err(struct rdmt_conn *rc, int err);
int psd_rdmt_set_nonblock(int fd);
int psd_rdmt_dev_get(struct ibv_context *verbs,
		     const struct psd_transport_knobs *knobs,
		     struct rdmt_dev **out);
void psd_rdmt_dev_put(struct rdmt_dev *d);

/* mr.c */
void psd_rdmt_mr_reg_failed(struct rdmt_dev *d, size_t len, int err,
			    const char *peer, uint64_t key);
int psd_rdmt_mr_get(struct rdmt_dev *d, void *addr, size_t len,
		    struct rdmt_mr **out);
void psd_rdmt_mr_put(struct rdmt_dev *d, struct rdmt_mr *m);
void psd_rdmt_keep_heap(void);

/* cm.c */
void psd_rdmt_on_cm(struct rdmt_conn *rc);

/* send.c */
uint8_t *psd_rdmt_tx_slot(struct rdmt_conn *rc, unsigned slot);
int psd_rdmt_post_slot(struct rdmt_conn *rc, unsigned kind, unsigned slot,
		       size_t len);
void psd_rdmt_maybe_credit(struct rdmt_conn *rc);
void psd_rdmt_wb_done(struct rdmt_conn *rc, unsigned wb);
int psd_rdmt_send(struct psd_conn *c, const struct psd_hdr *h,
		  const struct iovec *iov, int niov, unsigned timeout_ms);
int psd_rdmt_send_dev(struct psd_conn *c, const struct psd_hdr *h,
		      const struct iovec *iov, int niov, unsigned timeout_ms);

/* land.c */
int psd_rdmt_land_offer(struct rdmt_conn *rc, const struct psd_hdr *h);
int psd_rdmt_rx_land(struct rdmt_conn *rc, const struct rdmt_rxq_ent *e);
void psd_rdmt_on_grant(struct rdmt_conn *rc, const uint8_t *p, uint32_t len);
void psd_rdmt_on_regrant(struct rdmt_conn *rc, uint32_t cookie);
void psd_rdmt_maybe_return(struct rdmt_conn *rc);
int psd_rdmt_rx_return(struct rdmt_conn *rc, const uint8_t *p, uint32_t len);
void psd_rdmt_land_fini(struct rdmt_conn *rc);
uint8_t *psd_rdmt_wb_hdr(struct rdmt_conn *rc, unsigned wb);

/* lane.c */
#define RDMT_LANE_LATER 0x1a7e /* lane_join(): the lane part is not in */
int psd_rdmt_lane_create(struct rdmt_conn *rc);
int psd_rdmt_lane_connect(struct rdmt_conn *rc, uint32_t qpn, uint32_t psn);
void psd_rdmt_lane_abort(struct rdmt_conn *rc);
void psd_rdmt_lane_fini(struct rdmt_conn *rc);
void psd_rdmt_lane_destroy(struct rdmt_conn *rc);
void psd_rdmt_lane_on_recv(struct rdmt_conn *rc, const struct ibv_wc *wc);
int psd_rdmt_lane_join(struct rdmt_conn *rc, uint32_t imm, uint32_t len,
		       uint64_t want, uint32_t *total);
int psd_rdmt_lane_start(struct rdmt_dev *d);
void psd_rdmt_lane_stop(struct rdmt_dev *d);
bool psd_rdmt_lane_split(struct rdmt_conn *rc, const struct ibv_sge *sge,
			 int ns, uint64_t payload, unsigned wb, uint64_t raddr,
			 uint32_t rkey, uint32_t imm, struct ibv_sge *rest,
			 int *nrest, uint64_t *rest_raddr);
void psd_rdmt_wb_part(struct rdmt_conn *rc, unsigned wb);

/* recv.c */
int psd_rdmt_ctl_take(struct rdmt_conn *rc, unsigned *slot);
int psd_rdmt_post_recv(struct rdmt_conn *rc, unsigned slot);
void psd_rdmt_on_recv(struct rdmt_conn *rc, const struct ibv_wc *wc,
		      unsigned slot);
int psd_rdmt_progress(struct psd_conn *c);

#endif
