/* SPDX-License-Identifier: MIT */
/*
 * The van: one receive thread per node polling every connection of one
 * transport, plus sends from any thread.  The owner (postoffice or
 * scheduler) receives connection events and messages through struct
 * psd_van_cb, always on the van thread.
 */
#ifndef PSCHED_COMMON_VAN_H
#define PSCHED_COMMON_VAN_H

#include "transport/transport.h"
#include "psched.pb-c.h"

struct psd_van;

struct psd_van_cb {
	void *arg;
	/* A peer connected to our listener. */
	void (*accepted)(void *arg, struct psd_conn *c);
	/* Header in: choose the payload's destination (*dst, NULL to use
	 * the connection's scratch buffer).  PSD_RX_DISCARD reads the payload
	 * into nothing; -errno drops the connection. */
	int (*rx_header)(void *arg, struct psd_conn *c, const struct psd_hdr *h,
			 void **dst);
	/* Data message in (payload in place). */
	void (*rx_data)(void *arg, struct psd_conn *c, const struct psd_hdr *h,
			void *payload);
	/* Control message in, already unpacked; freed after return. */
	void (*rx_control)(void *arg, struct psd_conn *c,
			   const Psched__Control *msg);
	/* Connection gone (EOF, error, bad input); @err says why. */
	void (*closed)(void *arg, struct psd_conn *c, int err);
	/* Every tick_ms. */
	void (*tick)(void *arg);
	/* After a round that received one small message: may the loop
	 * busy-poll for the next (PS_POLL_US, van_wait())?  NULL: yes. */
	bool (*may_poll)(void *arg);
	unsigned tick_ms;
};

struct psd_van_opts {
	const struct psd_transport_ops *ops;
	uint64_t max_tensor;
	unsigned send_timeout_ms;
	/* Transport knobs (socket buffers, PS_RDMA_*) are taken from here;
	 * NULL: the defaults.  Only read during psd_van_create(). */
	const struct psched_cfg *cfg;
	/* Every connection counts as authenticated from birth: only for
	 * vans with no postoffice to run the handshake (the transport
	 * tests), so no message can arrive before psd_conn_set_authed(). */
	bool trusted;
};

int psd_van_create(const struct psd_van_opts *o, const struct psd_van_cb *cb,
		   struct psd_van **out);
/* Stop the thread, drop every connection, free.  NULL is a no-op.  Not
 * from the van thread. */
void psd_van_destroy(struct psd_van *van);
/* Listen on @addr; *@port gets the bound port. */
int psd_van_listen(struct psd_van *van, const struct psd_addr *addr,
		   unsigned *port);
/* Listen on @addr over @ops as well (before psd_van_start()); peers
 * accepted there go through the same callbacks and limits.  *@port gets
 * the bound port. */
int psd_van_listen_also(struct psd_van *van,
			const struct psd_transport_ops *ops,
			const struct psd_addr *addr, unsigned *port);
/* Start the receive thread (after listen, before connect). */
int psd_van_start(struct psd_van *van);
/* Connect to @addr and add the connection to the loop.  On 0 the caller
 * holds one reference (psd_conn_put()). */
int psd_van_connect(struct psd_van *van, const struct psd_addr *addr,
		    unsigned timeout_ms, const char *peer_desc,
		    struct psd_conn **out);
/* The same over another transport than the van's (the scheduler link is
 * always TCP). */
int psd_van_connect_via(struct psd_van *van,
			const struct psd_transport_ops *ops,
			const struct psd_addr *addr, unsigned timeout_ms,
			const char *peer_desc, struct psd_conn **out);
bool psd_van_is_self(const struct psd_van *van);
/*
 * Not on the van thread: receive on @c in this thread until @done(@arg)
 * (called before each wait for input and whenever @wake_fd, an eventfd
 * the caller's other threads write, or -1, is readable; thread safe) or
 * @timeout_ms.  The
 * van leaves @c alone meanwhile, and messages go through its callbacks
 * as usual, on this thread: a caller waiting for one answer takes it
 * without the van thread's wake-up and hand-off.  0: done after this
 * thread read input; 1: done before it read anything; -EAGAIN: @c
 * cannot be taken now (its transport does not allow it, not
 * authenticated, the request connection of a split pair, or the van is
 * reading it), wait otherwise; of a split pair, pass the answers
 * connection, where the awaited message comes (a failure there drops
 * the pair, as the van's own read's does, and a drop of either waits
 * until this returns before the owner hears of it);
 * -ETIMEDOUT; another -errno: @c failed (the van drops it with that
 * error).
 */
int psd_conn_rx_wait(struct psd_conn *c, int wake_fd, bool (*done)(void *),
		     void *arg, unsigned timeout_ms);

void psd_conn_get(struct psd_conn *c);
void psd_conn_put(struct psd_conn *c);
/* @c's peer proved it knows the job's secret (auth.h): lift the
 * pre-authentication limits.  Van thread. */
void psd_conn_set_authed(struct psd_conn *c);
/* Ask the van to drop @c (any thread); the closed callback follows.
 * The other connection of a split pair goes with it. */
void psd_conn_close(struct psd_conn *c);
/*
 * Bind the two connections of a split pair (transport.h psd_conn.pair):
 * from now on the van drops both when either goes, closing both before
 * either's closed callback (so nothing more arrives on the other), and
 * with @tx_to_pair every send on @req goes out on @ans.  If either is
 * already closed both are closed.  Any thread; once per pair.
 */
void psd_conn_pair(struct psd_conn *req, struct psd_conn *ans, bool tx_to_pair);
/* Release the references the two connections of @c's pair hold on each
 * other (psd_conn_pair() takes them), once their van is destroyed; the
 * caller still holds its own on @c.  NULL or no pair: nothing. */
void psd_conn_unpair(struct psd_conn *c);
/* Send header + payload (any thread; serialized per connection). */
int psd_conn_send(struct psd_conn *c, const struct psd_hdr *h,
		  const struct iovec *iov, int niov);
/* The same for a payload in GPU device memory (GPUDirect RDMA, the
 * transport's ->send_dev()).  -EOPNOTSUPP, nothing sent and @c kept,
 * when the transport has no such send or cannot register the memory;
 * other errors drop @c as psd_conn_send() does. */
int psd_conn_send_dev(struct psd_conn *c, const struct psd_hdr *h,
		      const struct iovec *iov, int niov);
/* Send header + a payload of h->length bytes that @fill writes: into
 * the transport's own memory when it can place it (->send_fill(), shm),
 * else into @buf (h->length bytes, the caller's), which then goes out as
 * psd_conn_send() sends it.  @fill runs exactly once, also when the send
 * fails (then into @buf), so it may do work that must happen anyway. */
int psd_conn_send_fill(struct psd_conn *c, const struct psd_hdr *h,
		       psd_fill_fn fill, void *arg, void *buf);
/* psd_conn_send(), but the transport may keep a small message aside
 * (->send_more()) until the next send on @c or psd_conn_flush(), which
 * the caller owes before it waits for anything the message causes. */
int psd_conn_send_more(struct psd_conn *c, const struct psd_hdr *h,
		       const struct iovec *iov, int niov);
int psd_conn_flush(struct psd_conn *c);
/* The transport's ->tx_room() for what @c sends: 1 if the path has
 * room, 0 if it is full, -EOPNOTSUPP when the transport cannot tell.
 * With 1 or 0, *@min_rtt_us (if not NULL) gets the path's minimum round
 * trip in microseconds. */
int psd_conn_tx_room(struct psd_conn *c, uint32_t *min_rtt_us);
/* An answer: on the van thread, kept aside like psd_conn_send_more()
 * and flushed by the van after the ->progress() call it came from (the
 * acks of the messages one read brought go out in one write); elsewhere
 * psd_conn_send(). */
int psd_conn_reply(struct psd_conn *c, const struct psd_hdr *h,
		   const struct iovec *iov, int niov);
/* Pack and send a control message. */
int psd_conn_send_control(struct psd_conn *c, int sender,
			  const Psched__Control *msg);
/* psd_conn_scratch(): transport.h. */

/* Payload bytes moved by this van. */
void psd_van_stats(const struct psd_van *van, uint64_t *tx, uint64_t *rx,
		   uint64_t *txm, uint64_t *rxm);

#endif
