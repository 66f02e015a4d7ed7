/* SPDX-License-Identifier: MIT */
/*
 * Shared-memory transport for peers on one host (PS_TRANSPORT=shm):
 * the private header of setup.c (names, listener, memory, handshake) and
 * data.c (send, receive, the ops table).
 *
 * Listening: an abstract-namespace Unix socket "\0psched-shm-<uid>-<port>"
 * stands in for the TCP port, so the node table's host:port works as is
 * (the host must be a local address; port 0 picks a free name).  Both
 * ends check with SO_PEERCRED that the other runs as our uid.
 *
 * Connecting: the connector creates a sealed memfd with two rings (one
 * per direction) and four eventfds (per ring: "data posted" and "space
 * freed or copy acknowledged") and passes them with SCM_RIGHTS.  The
 * Unix socket then carries no data; it stays open as the liveness
 * signal: a peer that exits or is killed closes it, and poll() reports
 * the hang-up to our van and to a blocked sender, so nothing waits for a
 * dead peer.  The van polls one fd per connection, so c->fd is a small
 * epoll set of the ring's data eventfd and the socket.
 *
 * Data: each message is a frame in the ring (wire header, mode, iovec
 * table).  Payloads below SHM_CMA_MIN follow the frame through the ring
 * (two copies, no syscall but the wake-up).  A payload sent with
 * ->send_fill() (up to SHM_PLACE_MAX) is written by its producer straight
 * into the ring, in one contiguous piece, and a consumer may read it
 * there (psd_conn.rx_inplace): once, no copy at either end.  A ->send()
 * payload from SHM_CMA_MIN to SHM_PLACE_MAX is placed the same way,
 * copied there from the caller's pieces: two copies in user space, one
 * at each end, which beat one process_vm_readv() of 4 KiB pages (it pins
 * every page) by 1.25-1.35x at 1 MiB (docs/benchmarks.md, "Shared memory").
 * Larger ones stay where they are: the frame carries the sender's iovec
 * addresses and the receiver, once psd_van_rx_header() chose the destination,
 * copies straight from the sender's memory with process_vm_readv() (one copy),
 * then acknowledges; the sender's send() returns on that acknowledgement,
 * except for requests (push, pushpull, init: transport.h lets them
 * return once the payload is on its way), which return once the frame is
 * posted, up to SHM_CMA_WINDOW unacknowledged per connection, so large
 * pushes are pipelined instead of one in flight per connection.
 * Each receiver probes at connect time whether it may read its peer and
 * tells the peer's sender in the ring's control block; when a read fails
 * with EPERM later, the receiver asks the sender to stream the rest of
 * that payload through the ring, and the connection stays in ring mode
 * (logged once per process).
 *
 * Bounds: rings have a fixed size, every wait of a sender is a poll()
 * with the van's send timeout (renewed on progress), one progress() call
 * moves at most SHM_RX_BUDGET bytes, and nothing is allocated per
 * message.  Counters in shared memory are checked before use: a broken
 * peer costs its connection only.
 */
#ifndef PSCHED_COMMON_TRANSPORT_SHM_SHM_INTERNAL_H
#define PSCHED_COMMON_TRANSPORT_SHM_SHM_INTERNAL_H

#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include "../transport.h"
/* bytes per direction, a power of two: a few 1 MiB payloads in flight */
#define SHM_RING_SIZE (8u << 20)
#define SHM_CTL_SIZE  4096u /* one control block per ring */
#define SHM_MAP_SIZE  (2u * SHM_CTL_SIZE + 2u * SHM_RING_SIZE)
#define SHM_CMA_MIN   (32u << 10) /* from here: placed, then process_vm_readv */
#define SHM_MAX_IOV   64
#define SHM_RX_BUDGET (8u << 20) /* bytes one progress() call moves */
#define SHM_CMA_CHUNK (2u << 20) /* bytes per psd_shm_cma_read() */
#ifndef SHM_SPLIT_MIN
#define SHM_SPLIT_MIN (256u << 10) /* from here split with the helper */
#endif
#define SHM_MAGIC     0x31306d6873737070ull /* "ppsshm01" */
#define SHM_PORT_BASE 20000u
#define SHM_PORT_SPAN 40000u
#define SHM_NFDS      5 /* memfd + 4 eventfds */
#define SHM_NO_STREAM UINT64_MAX
/* SHM_CMA_ASYNC messages a sender may have unacknowledged at a time */
#define SHM_CMA_WINDOW 64u

enum shm_mode {
	SHM_INLINE = 1, /* payload follows in the ring */
	SHM_CMA = 2,	/* receiver reads the sender's iovecs */
	/* The same for a request (psd_msg_is_request()): the sender did
	 * not wait for the acknowledgement (its buffers stay untouched
	 * until the answer, transport.h), so it cannot stream the payload
	 * if the read is refused: the receiver drops the connection. */
	SHM_CMA_ASYNC = 3,
	/* The payload follows in the ring, written there by the sender's
	 * fill (->send_fill()) and posted with its frame, in one piece:
	 * niov is the padding skipped after the frame so that the payload
	 * is aligned and does not wrap.  The receiver may read it in
	 * place. */
	SHM_PLACED = 4,
};
/* Largest payload ->send_fill() places: frame, padding (less than the
 * payload plus SHM_PLACE_ALIGN) and payload always fit in the ring. */
#define SHM_PLACE_MAX	(SHM_RING_SIZE / 2 - 4096u)
#define SHM_PLACE_ALIGN 64u /* a placed payload's start in the ring */

/*
 * Control block of one ring (one direction), in shared memory.  The
 * producer owns head, the consumer the rest; each side keeps its own
 * copy of the counter it owns and only publishes it here.
 */
struct shm_ctl {
	_Atomic uint64_t head; /* bytes ever written */
	char pad0[56];
	_Atomic uint64_t tail; /* bytes ever consumed */
	char pad1[56];
	_Atomic uint64_t acked;	      /* CMA messages completed */
	_Atomic uint64_t stream_from; /* last ack: SHM_NO_STREAM or offset */
	_Atomic uint32_t cma_ok;      /* the producer may send by address */
};

struct shm_frame {
	uint8_t hdr[PSD_HDR_SIZE];
	uint32_t mode;
	uint32_t niov; /* SHM_CMA: entries of the table that follows */
};

struct shm_riov {
	uint64_t base;
	uint64_t len;
};

/* Connection setup message, connector -> acceptor (with the fds) and
 * back (without). */
struct shm_hello {
	uint64_t magic;
	uint64_t probe; /* address of psd_shm_probe_word in the sender */
	uint32_t ring_size;
	uint32_t map_size;
};

struct shm_ring {
	struct shm_ctl *ctl;
	uint8_t *data;
	int data_fd;  /* eventfd: bytes posted (the consumer's van polls it) */
	int space_fd; /* eventfd: bytes consumed or a copy acknowledged */
};

struct shm_conn {
	struct psd_conn base;
	bool inited; /* fds below valid (the van zero-allocates us) */
	/* Accepted, the connector's hello not in yet: only the socket is
	 * polled, nothing can be sent (psd_shm_accept_finish()). */
	atomic_bool hello_wait;
	pthread_t acceptor; /* the van thread that accepted it */
	int sock;	    /* liveness only */
	int evfd[4];
	void *map;
	pid_t peer_pid;
	struct shm_ring tx; /* we produce */
	struct shm_ring rx; /* we consume */
	/* Send side, under c->send_lock. */
	uint64_t tx_head;
	uint64_t cma_sent;
	/* Receive side, van thread only. */
	uint64_t rx_tail;
	uint64_t cma_done;
	bool in_payload;
	bool hup;
	uint32_t mode;
	uint32_t niov; /* SHM_PLACED: padding */
	struct psd_hdr hdr;
	uint8_t *dst; /* payload destination, NULL = discard */
	uint64_t got;
	struct shm_riov riov[SHM_MAX_IOV];
};

/* copy.c */
/* Read @len payload bytes at offset @off of the current message out of
 * the sender's memory into sc->dst + @off: bytes read or -errno. */
ssize_t psd_shm_cma_read_at(const struct shm_conn *sc, uint64_t off,
			    size_t len);
/* The same from sc->got on, large pieces split with the process's copy
 * helper thread (van thread only). */
ssize_t psd_shm_cma_read(const struct shm_conn *sc, size_t len);

/* setup.c */
/* Both ends in one process order their ring updates through this too. */
extern atomic_uint psd_shm_local_sync;
/* The word a receiver reads from its peer to probe process_vm_readv. */
extern const uint64_t psd_shm_probe_word;
/* Log once per process that process_vm_readv to @pid failed with @err. */
void psd_shm_cma_warn(pid_t pid, int err);
/* The listener and connection set-up ops (see struct psd_transport_ops). */
int psd_shm_listen(struct psd_listener *l, const struct psd_addr *addr);
int psd_shm_accept(struct psd_listener *l, struct psd_conn *c);
/* Van thread, from ->progress() while sc->hello_wait: take the
 * connector's hello if it came (0 with hello_wait still set if not
 * yet), map its memory and answer; -errno drops the connection. */
int psd_shm_accept_finish(struct shm_conn *sc);
void psd_shm_listen_close(struct psd_listener *l);
int psd_shm_connect(struct psd_conn *c, const struct psd_addr *addr,
		    unsigned timeout_ms);

static inline struct shm_conn *to_shm(struct psd_conn *c)
{
	return psd_container_of(c, struct shm_conn, base);
}

/*
 * Both ends in one process (tests) map the memfd twice, so a release on
 * one mapping and the acquire on the other are different addresses to
 * ThreadSanitizer; a process-wide atomic states that order to it.
 * Separate processes never touch it.
 */
static inline void shm_local_release(const struct shm_conn *sc)
{
	if (sc->peer_pid == getpid())
		atomic_fetch_add_explicit(&psd_shm_local_sync, 1,
					  memory_order_release);
}

static inline void shm_local_acquire(const struct shm_conn *sc)
{
	if (sc->peer_pid == getpid())
		(void)atomic_load_explicit(&psd_shm_local_sync,
					   memory_order_acquire);
}

static inline void shm_evfd_signal(int fd)
{
	uint64_t one = 1;

	(void)!write(fd, &one, sizeof(one));
}

static inline void shm_evfd_clear(int fd)
{
	uint64_t v;

	(void)!read(fd, &v, sizeof(v));
}

static inline void shm_close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

static inline void shm_conn_init(struct shm_conn *sc)
{
	int i;

	sc->sock = -1;
	for (i = 0; i < 4; i++)
		sc->evfd[i] = -1;
	sc->inited = true;
}

#endif
