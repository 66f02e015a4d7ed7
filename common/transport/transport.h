/* SPDX-License-Identifier: MIT */
/*
 * Transport vtable.  A transport moves whole messages (struct psd_hdr +
 * payload) over one connection.  The van owns the event loop: it polls
 * each connection's fd and calls ->progress() on its thread; a transport
 * reports each incoming message by two upcalls on that thread, so the
 * payload lands straight in the buffer its consumer chose:
 *   van_rx_header(): the header is complete and valid; pick the payload's
 *                    destination (or NULL to discard it);
 *   van_rx_msg():    the payload is in place.
 */
#ifndef PSCHED_COMMON_TRANSPORT_TRANSPORT_H
#define PSCHED_COMMON_TRANSPORT_TRANSPORT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#include "internal.h"
#include "wire.h"

struct psd_van;
struct psd_conn;
struct psd_listener;

struct psd_addr {
	char host[256];
	unsigned port;
};

struct psd_conn {
	const struct psd_transport_ops *ops;
	struct psd_van *van;
	int fd;			   /* polled for input by the van; -1 none */
	atomic_int refs;	   /* list + every holder */
	atomic_bool closed;	   /* no more sends accepted */
	pthread_mutex_t send_lock; /* one message at a time on the wire */
	int peer_id;		   /* node id once known, else -1 */
	char peer[128];		   /* "server 1 (127.0.0.1:4000)" for logs */
	void *ctx;		   /* owner's per-connection state */
	void *scratch;		   /* reusable receive buffer (van thread) */
	size_t scratch_cap;
	struct psd_list link; /* van->conns, guarded by van->lock */
	bool in_list;
};

struct psd_listener {
	const struct psd_transport_ops *ops;
	int fd;
	unsigned port; /* bound port, read back after listen */
	void *priv;
};

struct psd_transport_ops {
	const char *name; /* "tcp", "rdma", "loop" */
	size_t conn_size; /* van zero-allocates this per connection */
	/* Bind and listen on @addr (port 0 = any); sets l->fd and l->port.
	 * Any thread; errors name the address in psched_errmsg(). */
	int (*listen)(struct psd_listener *l, const struct psd_addr *addr);
	/* Accept one pending connection into @c (van thread); -EAGAIN when
	 * none is pending. */
	int (*accept)(struct psd_listener *l, struct psd_conn *c);
	void (*listen_close)(struct psd_listener *l);
	/* Blocking connect with timeout; sets c->fd.  Any thread. */
	int (*connect)(struct psd_conn *c, const struct psd_addr *addr,
		       unsigned timeout_ms);
	/*
	 * Send header + payload iov; returns once the caller's buffers may
	 * be reused, or -ETIMEDOUT after @timeout_ms without progress, or
	 * -errno.  Called with c->send_lock held.  Exception: for requests
	 * (psd_msg_is_request(): push, pushpull, init) a transport may
	 * return once the payload is on its way, because the KV API keeps
	 * a request's buffers untouched until its answer, which the peer
	 * sends only after the whole payload arrived (rdma does this).
	 */
	int (*send)(struct psd_conn *c, const struct psd_hdr *h,
		    const struct iovec *iov, int niov, unsigned timeout_ms);
	/* Input is ready (van thread): read and deliver messages.  0, or
	 * -errno when the connection must be dropped (-ECONNRESET: EOF). */
	int (*progress)(struct psd_conn *c);
	/* Stop the connection; the van thread then sees EOF.  Idempotent,
	 * never blocks, any thread. */
	void (*close)(struct psd_conn *c);
	/* Release resources; safe after a failed connect. */
	void (*fini)(struct psd_conn *c);
};

/* "tcp" or "rdma" (when built with libibverbs/librdmacm); NULL else. */
const struct psd_transport_ops *psd_transport_find(const char *name);
extern const struct psd_transport_ops psd_tcp_ops;
/* In-process connections between vans of one process (loop.c). */
extern const struct psd_transport_ops psd_loop_ops;
#ifdef PSCHED_HAVE_RDMA
extern const struct psd_transport_ops psd_rdma_ops;
#endif

/* True when an RDMA device has an active port (honours PS_RDMA_DEVICE,
 * PS_RDMA_PORT, PS_RDMA_GID_INDEX); @why says what was found or missing.
 * Any thread, opens and closes the devices. */
bool psd_rdma_probe(char *why, size_t len);
/* This process's node id, carried in the RDMA connect data for logs. */
void psd_rdma_set_local_id(int id);

/* Counters of the RDMA transport (process-wide), for tests and logs. */
struct psd_rdma_stats {
	uint64_t eager;	       /* messages sent in one SEND */
	uint64_t rndv;	       /* messages RDMA-written in place */
	uint64_t copy;	       /* large messages copied through SENDs */
	uint64_t regs;	       /* memory registrations */
	uint64_t evictions;    /* cached registrations dropped */
	uint64_t reg_failures; /* registrations that failed */
	uint64_t mr_bytes;     /* bytes in the registration cache now */
	uint64_t mr_budget;    /* PS_RDMA_MR_BUDGET */
};
void psd_rdma_stats(struct psd_rdma_stats *st);

/* psd_van_rx_header() result: read the payload but throw it away. */
#define PSD_RX_DISCARD 1

/* Upcalls into the van (van thread only), see the top of this file.
 * psd_van_rx_header() returns 0 (payload to *dst), PSD_RX_DISCARD, or
 * -errno to drop the connection. */
int psd_van_rx_header(struct psd_conn *c, const struct psd_hdr *h, void **dst);
void psd_van_rx_msg(struct psd_conn *c, const struct psd_hdr *h, void *payload);
/* Largest tensor the van accepts in a header. */
uint64_t psd_van_max_tensor(const struct psd_conn *c);

#endif
