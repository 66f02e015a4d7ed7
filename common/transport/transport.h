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
#include <stdio.h>
#include <string.h>
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

struct sockaddr_in;
struct psched_cfg;

/* Writes a message's @len payload bytes at @dst (psd_conn_send_fill()). */
typedef void (*psd_fill_fn)(void *arg, uint8_t *dst, size_t len);

/*
 * Transport knobs, taken from the node's struct psched_cfg (options.c:
 * defaults, PS_* variables, flags); transports never read the
 * environment.  The van keeps a copy; transports reach it through
 * psd_van_knobs(c->van) or l->knobs.
 */
struct psd_transport_knobs {
	uint64_t socket_buf_bytes; /* tcp: SO_SNDBUF/SO_RCVBUF, 0 = kernel's */
	char rdma_device[64];	   /* "" = any */
	unsigned rdma_port;
	int rdma_gid_index; /* -1: unset */
	unsigned rdma_recv_depth;
	unsigned rdma_send_depth;
	unsigned rdma_buf_bytes;
	unsigned rdma_inline;
	unsigned rdma_cq_depth;
	int rdma_spin_us; /* -1: unset (20, 0 on rxe/siw) */
	uint64_t rdma_mr_budget;
	int rdma_lane_min; /* -1: unset (256K on rxe, else 0) */
	bool rdma_test_fail_reg;
};

/* Copy the transport knobs of @cfg; @cfg NULL gives the defaults. */
void psd_transport_knobs_init(struct psd_transport_knobs *k,
			      const struct psched_cfg *cfg);

/*
 * Resolve @addr to an IPv4 socket address (tcp, rdma).  An empty host or
 * "0.0.0.0" is INADDR_ANY.  0, or -EHOSTUNREACH with psched_errmsg()
 * naming the host.  Any thread; may block in getaddrinfo().
 */
int psd_addr_resolve(const struct psd_addr *addr, struct sockaddr_in *sin);

struct psd_conn {
	const struct psd_transport_ops *ops;
	struct psd_van *van;
	int fd;			   /* polled for input by the van; -1 none */
	atomic_int refs;	   /* list + every holder */
	atomic_bool closed;	   /* no more sends accepted */
	pthread_mutex_t send_lock; /* one message at a time on the wire */
	/* Held around ->progress(): by the van thread, or by a caller
	 * receiving on the connection itself (psd_conn_rx_wait()), while
	 * the van leaves c->fd alone; rx_err is what ended such a wait
	 * (the van drops the connection with it). */
	pthread_mutex_t rx_lock;
	atomic_int rx_err;
	int peer_id;	/* node id once known, else -1 */
	char peer[128]; /* "server 1 (127.0.0.1:4000)" for logs */
	void *ctx;	/* owner's per-connection state */
	void *scratch;	/* reusable receive buffer (van thread) */
	size_t scratch_cap;
	/* A block of psd_raw_blocks that the role's rx_header lent as this
	 * message's *dst (psd_conn_rx_block()): given back after rx_data
	 * unless psched_raw_keep() took it (van thread). */
	void *rx_own;
	/* GPUDirect receive (van thread, per message).  rx_direct: set by
	 * the transport before psd_van_rx_header(): this payload will be
	 * written into the chosen buffer by the NIC (rdma rendezvous), the
	 * CPU never copies it, so the consumer may choose device memory and
	 * then sets rx_dev (the van clears it before asking).  If that
	 * buffer cannot be registered the transport receives into the
	 * scratch buffer instead and psd_van_rx_msg() says so by its
	 * payload pointer. */
	bool rx_direct;
	bool rx_dev;
	/* In-place receive (van thread, per message): set by the transport
	 * before psd_van_rx_header() when the whole payload is already
	 * readable in the transport's own memory (shm: posted in the ring,
	 * contiguous, 64-byte aligned), else NULL.  A consumer may choose
	 * it as the destination: nothing is copied and psd_van_rx_msg()
	 * gets this pointer.  The peer can still write that memory, so
	 * such a consumer must copy whatever it checks (lengths, indices)
	 * before checking it; values it only sums or copies may be read in
	 * place.  Valid until psd_van_rx_msg() returns. */
	void *rx_inplace;
	struct psd_list link; /* van->conns, guarded by van->lock */
	bool in_list;
	/* Authentication (common/auth.h).  Until its owner calls
	 * psd_conn_set_authed() the van takes only small control messages
	 * on it and, if it was accepted, drops it after PS_AUTH_TIMEOUT. */
	atomic_bool authed;
	bool accepted;	   /* came through our listener */
	uint64_t born_ms;  /* when it was accepted or opened */
	uint8_t auth_step; /* owner's handshake progress (van thread) */
	int auth_id;	   /* id the peer claims in its hello */
	uint8_t nonce_mine[32];
	uint8_t nonce_peer[32];
	void *auth_msg; /* owner's message held until authed (freed
			 * with the connection) */
	size_t auth_msg_len;
	/* A worker-server pair split in two connections (PS_TCP_SPLIT):
	 * channel is PSD_CHAN_*, set before the hello.  pair is the other
	 * connection once bound (psd_conn_pair()), each holding a reference
	 * to the other until psd_conn_unpair().  The van drops both when
	 * either goes; with tx_to_pair (server) sends on the request
	 * connection go out on the answers one. */
	uint8_t channel;
	bool tx_to_pair;
	struct psd_conn *_Atomic pair;
};

/* psd_conn.channel, Hello.channel */
enum {
	PSD_CHAN_BOTH = 0, /* one connection, both directions */
	PSD_CHAN_REQ = 1,  /* worker -> server requests of a split pair */
	PSD_CHAN_ANS = 2,  /* server -> worker messages of that pair */
};

struct psd_listener {
	const struct psd_transport_ops *ops;
	const struct psd_transport_knobs *knobs; /* the van's, set by it */
	int fd;
	unsigned port; /* bound port, read back after listen */
	void *priv;
};

struct psd_transport_ops {
	const char *name; /* "tcp", "rdma", "loop" */
	size_t conn_size; /* van zero-allocates this per connection */
	/* ->send() of a request may return before the peer has read its
	 * payload (the exception under ->send()): a caller that lends the
	 * buffer only for the send (the worker's GPU staging slots) must
	 * keep it until the answer. */
	bool req_send_early;
	/* ->progress() may run on another thread than the van's while the
	 * van does not poll c->fd (psd_conn_rx_wait()): all its receive
	 * state is the connection's, and c->fd alone says input is
	 * ready. */
	bool caller_rx;
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
	/* Optional (NULL: not supported; rdma only): ->send() of a
	 * payload in GPU device memory (GPUDirect RDMA).  The CPU never
	 * reads it: it goes out only by RDMA writes from a registration of
	 * the device memory.  -EOPNOTSUPP when that registration fails,
	 * before anything went on the wire (the caller may stage it and
	 * ->send() it instead); other errors as ->send(). */
	int (*send_dev)(struct psd_conn *c, const struct psd_hdr *h,
			const struct iovec *iov, int niov, unsigned timeout_ms);
	/* Optional (NULL: ->send() is used): ->send(), except that the
	 * transport may copy a small message aside and return at once; it
	 * goes out, in order, with the next ->send() or ->send_more() that
	 * does not fit aside, or at ->flush().  The caller must ->flush()
	 * before it waits for anything the message may cause (the van does
	 * so after each ->progress() call; psd_conn_reply()).  Called
	 * with c->send_lock held. */
	int (*send_more)(struct psd_conn *c, const struct psd_hdr *h,
			 const struct iovec *iov, int niov,
			 unsigned timeout_ms);
	/* Optional (NULL: not supported; shm): ->send() of a payload that
	 * @fill writes straight into the transport's own memory (the shm
	 * ring), so it is written once on its way to the peer.
	 * -EMSGSIZE, nothing sent, when the transport cannot place
	 * h->length bytes (the caller fills a buffer and ->send()s it);
	 * other errors as ->send().  Called with c->send_lock held. */
	int (*send_fill)(struct psd_conn *c, const struct psd_hdr *h,
			 psd_fill_fn fill, void *arg, unsigned timeout_ms);
	/* Optional with ->send_more(): send what it kept aside.  0, or as
	 * ->send().  Called with c->send_lock held. */
	int (*flush)(struct psd_conn *c, unsigned timeout_ms);
	/* Input is ready (van thread): read and deliver messages.  0, or
	 * -errno when the connection must be dropped (-ECONNRESET: EOF). */
	int (*progress)(struct psd_conn *c);
	/* Stop the connection; the van thread then sees EOF.  Idempotent,
	 * never blocks, any thread. */
	void (*close)(struct psd_conn *c);
	/* Release resources; safe after a failed connect. */
	void (*fini)(struct psd_conn *c);
	/* Optional (NULL: unknown; tcp only): 1 if the path has room (no
	 * standing queue holds what the sender keeps in flight), 0 if not,
	 * or -errno; with 1 or 0, *min_rtt_us (if not NULL) gets the path's
	 * minimum round trip.  Any thread, cheap (one getsockopt). */
	int (*tx_room)(struct psd_conn *c, uint32_t *min_rtt_us);
};

/*
 * The transport registry (registry.c): "tcp", "loop" (in-process, for
 * tests), "shm" (processes of one host) and "rdma" (when built with
 * libibverbs/librdmacm); NULL for any other name.
 * psd_transport_is_known(): @name is one of psched's transports, built
 * in or not (the options table accepts "rdma" in any build; creating a
 * node then says the build lacks it).
 */
const struct psd_transport_ops *psd_transport_find(const char *name);
bool psd_transport_is_known(const char *name);
extern const struct psd_transport_ops psd_tcp_ops;
/* In-process connections between vans of one process (loop.c). */
extern const struct psd_transport_ops psd_loop_ops;
/* Shared memory between processes of one host (shm.c). */
extern const struct psd_transport_ops psd_shm_ops;
/*
 * Where shared memory reaches (shm/setup.c): "<boot id>/<netns>/<uid>",
 * this boot of the kernel, the network namespace (the shm listeners'
 * abstract Unix names live in it) and our uid (the listener refuses
 * others).  Two processes with equal keys can link by shm; different
 * keys (another host, another namespace or user) must not try.  0, or
 * -errno with psched_errmsg() naming what could not be read.
 */
#define PSD_SHM_HOST_KEY_LEN 96
int psd_shm_host_key(char *buf, size_t len);
#ifdef PSCHED_HAVE_RDMA
extern const struct psd_transport_ops psd_rdma_ops;
#define PSD_RDMA_OPS (&psd_rdma_ops)
#else
#define PSD_RDMA_OPS NULL
#endif

/* Counters of the RDMA transport (process-wide), for tests and logs. */
struct psd_rdma_stats {
	uint64_t eager;	       /* messages sent in one SEND */
	uint64_t rndv;	       /* messages RDMA-written in place */
	uint64_t cached;       /* of those: by a cached grant, no RTS/CTS */
	uint64_t regrants;     /* grants renewed on another SEND, no GRANT */
	uint64_t grants;       /* grants taken from GRANT messages */
	uint64_t copy;	       /* large messages copied through SENDs */
	uint64_t regs;	       /* memory registrations */
	uint64_t evictions;    /* cached registrations dropped */
	uint64_t reg_failures; /* registrations that failed */
	uint64_t mr_bytes;     /* bytes in the registration cache now */
	uint64_t mr_budget;    /* rdma_mr_budget of the device's knobs */
	uint64_t lane;	       /* writes sent half on the lane (lane.c) */
};

/*
 * The RDMA transport (common/transport/rdma/) is compiled only when
 * rdma-core is installed; other builds get these stubs.
 */
#ifdef PSCHED_HAVE_RDMA
/* True when an RDMA device has an active port (honours @k's rdma_device,
 * rdma_port, rdma_gid_index; NULL = defaults); @why says what was found
 * or missing.  Any thread, opens and closes the devices. */
bool psd_rdma_probe(const struct psd_transport_knobs *k, char *why, size_t len);
/* This process's node id, carried in the RDMA connect data for logs. */
void psd_rdma_set_local_id(int id);
void psd_rdma_stats(struct psd_rdma_stats *st);
#else
static inline bool psd_rdma_probe(const struct psd_transport_knobs *k,
				  char *why, size_t len)
{
	(void)k;
	snprintf(why, len, "built without libibverbs/librdmacm");
	return false;
}

static inline void psd_rdma_set_local_id(int id)
{
	(void)id;
}

static inline void psd_rdma_stats(struct psd_rdma_stats *st)
{
	memset(st, 0, sizeof(*st));
}
#endif

/* psd_van_rx_header() result: read the payload but throw it away. */
#define PSD_RX_DISCARD 1

/* Upcalls into the van (van thread only), see the top of this file.
 * psd_van_rx_header() returns 0 (payload to *dst), PSD_RX_DISCARD, or
 * -errno to drop the connection. */
int psd_van_rx_header(struct psd_conn *c, const struct psd_hdr *h, void **dst);
void psd_van_rx_msg(struct psd_conn *c, const struct psd_hdr *h, void *payload);
/* Grow @c's receive scratch buffer to @len; NULL on -ENOMEM (van
 * thread). */
void *psd_conn_scratch(struct psd_conn *c, size_t len);
/* A receive buffer of @len bytes that psched_raw_keep() may hand to the
 * application, lent to @c for the message being received (its *dst); NULL
 * (use the scratch buffer) for a small message or without memory (van
 * thread). */
void *psd_conn_rx_block(struct psd_conn *c, size_t len);
/* Fill @m's sizes and arrays from raw message @h's @payload (wire.h,
 * PSD_F_RAW; no keys with PSD_RAW_ASKED), and let psched_raw_keep() take
 * the block when @payload is the one @c lent (van thread). */
void psd_raw_msg_layout(struct psched_raw_msg *m, const struct psd_hdr *h,
			const void *payload, const struct psd_conn *c);
/* Largest tensor the van accepts in a header. */
uint64_t psd_van_max_tensor(const struct psd_conn *c);
/* The knobs the van was created with (any thread, never changes). */
const struct psd_transport_knobs *psd_van_knobs(const struct psd_van *van);

#endif
