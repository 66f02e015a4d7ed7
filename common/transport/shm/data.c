// SPDX-License-Identifier: MIT
/* Shared-memory transport: the send and receive paths and the ops table
 * (see shm_internal.h). */
#include "shm_internal.h"

/* ---- send ------------------------------------------------------------- */

/* The peer hung up or we were closed. */
static bool shm_is_down(struct shm_conn *sc)
{
	struct pollfd p = { .fd = sc->sock, .events = POLLRDHUP };

	return atomic_load(&sc->base.closed) || poll(&p, 1, 0) > 0;
}

/*
 * Sender: sleep until the consumer frees space or acknowledges, the
 * connection goes down, or @deadline_ms.  The caller re-checks its
 * condition after each return 0 (the eventfd is cleared here, before).
 */
static int shm_tx_wait(struct shm_conn *sc, uint64_t deadline_ms)
{
	struct pollfd p[2] = { { .fd = sc->tx.space_fd, .events = POLLIN },
			       { .fd = sc->sock, .events = POLLRDHUP } };
	uint64_t now = psd_now_ms();
	int ret;

	if (atomic_load(&sc->base.closed))
		return -ECONNRESET;
	if (now >= deadline_ms)
		return -ETIMEDOUT;
	ret = poll(p, 2, (int)(deadline_ms - now));
	if (ret < 0)
		return errno == EINTR ? 0 : psd_neg_errno();
	if (p[1].revents)
		return -ECONNRESET;
	if (p[0].revents)
		shm_evfd_clear(sc->tx.space_fd);
	return 0;
}

/*
 * A send on an accepted connection whose hello is not in yet waits for
 * it (the van thread takes it) until @deadline_ms; on the van thread
 * itself it cannot come: -ENOTCONN.
 */
static int shm_tx_ready(struct shm_conn *sc, uint64_t deadline_ms)
{
	while (atomic_load(&sc->hello_wait)) {
		if (pthread_equal(pthread_self(), sc->acceptor))
			return -ENOTCONN;
		if (atomic_load(&sc->base.closed))
			return -ECONNRESET;
		if (psd_now_ms() >= deadline_ms)
			return -ETIMEDOUT;
		usleep(1000);
	}
	return 0;
}

/* Free bytes in our tx ring, or -EPROTO for a corrupt consumer tail. */
static int64_t shm_tx_room(struct shm_conn *sc)
{
	uint64_t tail =
		atomic_load_explicit(&sc->tx.ctl->tail, memory_order_acquire);
	uint64_t used = sc->tx_head - tail;

	if (used > SHM_RING_SIZE)
		return -EPROTO;
	return (int64_t)(SHM_RING_SIZE - used);
}

static void shm_ring_put(uint8_t *ring, uint64_t pos, const void *src,
			 size_t len)
{
	size_t off = (size_t)(pos & (SHM_RING_SIZE - 1));
	size_t n = SHM_RING_SIZE - off < len ? SHM_RING_SIZE - off : len;

	memcpy(ring + off, src, n);
	memcpy(ring, (const uint8_t *)src + n, len - n);
}

static void shm_ring_get(const uint8_t *ring, uint64_t pos, void *dst,
			 size_t len)
{
	size_t off = (size_t)(pos & (SHM_RING_SIZE - 1));
	size_t n = SHM_RING_SIZE - off < len ? SHM_RING_SIZE - off : len;

	memcpy(dst, ring + off, n);
	memcpy((uint8_t *)dst + n, ring, len - n);
}

/* Publish @n more bytes written at the ring's head and wake the consumer. */
static void shm_tx_publish(struct shm_conn *sc, size_t n)
{
	sc->tx_head += n;
	shm_local_release(sc);
	atomic_store_explicit(&sc->tx.ctl->head, sc->tx_head,
			      memory_order_release);
	shm_evfd_signal(sc->tx.data_fd);
}

/*
 * Append @len bytes to the tx ring and wake the consumer.  @whole: all in
 * one go (frames), else as room appears.  Waits bounded by @timeout_ms
 * without progress.
 */
static int shm_tx_put(struct shm_conn *sc, const uint8_t *src, size_t len,
		      bool whole, unsigned timeout_ms)
{
	uint64_t deadline_ms = psd_now_ms() + timeout_ms;
	int64_t room;
	size_t n;
	int ret;

	while (len) {
		room = shm_tx_room(sc);
		if (room < 0)
			return (int)room;
		n = (size_t)room < len ? (size_t)room : len;
		if (!n || (whole && n < len)) {
			ret = shm_tx_wait(sc, deadline_ms);
			if (ret)
				return ret;
			continue;
		}
		shm_ring_put(sc->tx.data, sc->tx_head, src, n);
		shm_tx_publish(sc, n);
		src += n;
		len -= n;
		deadline_ms = psd_now_ms() + timeout_ms;
	}
	return 0;
}

/* Stream the payload from byte @from on through the ring. */
static int shm_tx_stream(struct shm_conn *sc, const struct iovec *iov, int niov,
			 uint64_t from, unsigned timeout_ms)
{
	size_t len;
	int i, ret;

	for (i = 0; i < niov; i++) {
		len = iov[i].iov_len;
		if (from >= len) {
			from -= len;
			continue;
		}
		ret = shm_tx_put(sc, (const uint8_t *)iov[i].iov_base + from,
				 len - (size_t)from, false, timeout_ms);
		if (ret)
			return ret;
		from = 0;
	}
	return 0;
}

/* Wait until at most @window of our CMA messages are unacknowledged
 * (0: all acknowledged); then *@from (if not NULL): where to stream the
 * last one's payload from if it could not be read (SHM_NO_STREAM). */
static int shm_tx_wait_ack(struct shm_conn *sc, uint64_t window,
			   unsigned timeout_ms, uint64_t *from)
{
	uint64_t deadline_ms = psd_now_ms() + timeout_ms;
	uint64_t acked;
	int ret;

	for (;;) {
		acked = atomic_load_explicit(&sc->tx.ctl->acked,
					     memory_order_acquire);
		shm_local_acquire(sc);
		if (acked > sc->cma_sent)
			return -EPROTO;
		if (sc->cma_sent - acked <= window)
			break;
		ret = shm_tx_wait(sc, deadline_ms);
		if (ret)
			return ret;
	}
	if (from)
		*from = atomic_load_explicit(&sc->tx.ctl->stream_from,
					     memory_order_relaxed);
	return 0;
}

/* ->send_fill(): the frame, padding so that the payload does not wrap,
 * and the payload, which @fill writes in the ring; posted in one go. */
static int shm_send_fill(struct psd_conn *c, const struct psd_hdr *h,
			 psd_fill_fn fill, void *arg, unsigned timeout_ms)
{
	struct shm_conn *sc = to_shm(c);
	struct shm_frame fr = { .mode = SHM_PLACED };
	uint64_t deadline_ms = psd_now_ms() + timeout_ms;
	size_t len = (size_t)h->length, off, pad, need;
	int64_t room;
	int ret;

	ret = shm_tx_ready(sc, deadline_ms);
	if (ret)
		return ret;
	if (h->length > SHM_PLACE_MAX)
		return -EMSGSIZE;
	/* The payload starts SHM_PLACE_ALIGN-aligned (rows are read in
	 * place as their type: bfloat16, float...), at the ring's start if
	 * it would wrap. */
	off = (size_t)((sc->tx_head + sizeof(fr)) & (SHM_RING_SIZE - 1));
	pad = (SHM_PLACE_ALIGN - off % SHM_PLACE_ALIGN) % SHM_PLACE_ALIGN;
	if (off + pad + len > SHM_RING_SIZE)
		pad = SHM_RING_SIZE - off;
	need = sizeof(fr) + pad + len;
	for (;;) {
		room = shm_tx_room(sc);
		if (room < 0)
			return (int)room;
		if ((size_t)room >= need)
			break;
		ret = shm_tx_wait(sc, deadline_ms);
		if (ret)
			return ret;
	}
	fr.niov = (uint32_t)pad;
	psd_hdr_encode(h, fr.hdr);
	shm_ring_put(sc->tx.data, sc->tx_head, &fr, sizeof(fr));
	if (len)
		fill(arg, sc->tx.data + ((off + pad) & (SHM_RING_SIZE - 1)),
		     len);
	shm_tx_publish(sc, need);
	return 0;
}

/* A payload from SHM_CMA_MIN to SHM_PLACE_MAX: the caller's pieces,
 * copied one after another into the ring by shm_send_fill().  shm_send()
 * checked that they add up to the header's length, the @len given. */
struct shm_gather {
	const struct iovec *iov;
	int niov;
};

static void shm_gather_fill(void *arg, uint8_t *dst, size_t len)
{
	const struct shm_gather *g = arg;
	int i;

	(void)len;
	for (i = 0; i < g->niov; i++) {
		if (g->iov[i].iov_len)
			memcpy(dst, g->iov[i].iov_base, g->iov[i].iov_len);
		dst += g->iov[i].iov_len;
	}
}

static int shm_send(struct psd_conn *c, const struct psd_hdr *h,
		    const struct iovec *iov, int niov, unsigned timeout_ms)
{
	struct shm_conn *sc = to_shm(c);
	uint8_t buf[sizeof(struct shm_frame) +
		    SHM_MAX_IOV * sizeof(struct shm_riov)];
	struct shm_frame fr = { .mode = SHM_INLINE };
	struct shm_riov rv;
	uint64_t from = SHM_NO_STREAM;
	int i, ret;

	ret = shm_tx_ready(sc, psd_now_ms() + timeout_ms);
	if (ret)
		return ret;
	if (h->length >= SHM_CMA_MIN && h->length <= SHM_PLACE_MAX) {
		struct shm_gather g = { iov, niov };
		uint64_t sum = 0;

		for (i = 0; i < niov; i++)
			sum += iov[i].iov_len;
		if (sum != h->length)
			return -EINVAL;
		return shm_send_fill(c, h, shm_gather_fill, &g, timeout_ms);
	}
	if (niov > SHM_MAX_IOV)
		return -EINVAL;
	psd_hdr_encode(h, fr.hdr);
	if (h->length >= SHM_CMA_MIN && atomic_load(&sc->tx.ctl->cma_ok))
		fr.mode = psd_msg_is_request(h->type) ? SHM_CMA_ASYNC : SHM_CMA;
	for (i = 0; i < niov && fr.mode != SHM_INLINE; i++) {
		if (!iov[i].iov_len)
			continue;
		rv.base = (uint64_t)(uintptr_t)iov[i].iov_base;
		rv.len = iov[i].iov_len;
		memcpy(buf + sizeof(fr) + fr.niov++ * sizeof(rv), &rv,
		       sizeof(rv));
	}
	memcpy(buf, &fr, sizeof(fr));
	/* Bound what the receiver still has to read of us. */
	if (fr.mode == SHM_CMA_ASYNC) {
		ret = shm_tx_wait_ack(sc, SHM_CMA_WINDOW - 1, timeout_ms, NULL);
		if (ret)
			return ret;
	}
	ret = shm_tx_put(sc, buf, sizeof(fr) + fr.niov * sizeof(rv), true,
			 timeout_ms);
	if (ret)
		return ret;
	if (fr.mode == SHM_CMA_ASYNC) {
		sc->cma_sent++;
		return 0;
	}
	if (fr.mode == SHM_CMA) {
		sc->cma_sent++;
		ret = shm_tx_wait_ack(sc, 0, timeout_ms, &from);
		if (ret || from == SHM_NO_STREAM)
			return ret;
	} else {
		from = 0;
	}
	return shm_tx_stream(sc, iov, niov, from, timeout_ms);
}

/* ---- receive ---------------------------------------------------------- */

/* Bytes posted in our rx ring, or -EPROTO for a corrupt producer head. */
static int64_t shm_rx_avail(struct shm_conn *sc)
{
	uint64_t head =
		atomic_load_explicit(&sc->rx.ctl->head, memory_order_acquire);
	uint64_t n = head - sc->rx_tail;

	if (n > SHM_RING_SIZE) {
		psd_err("dropping connection from %s: ring head corrupt",
			sc->base.peer);
		return -EPROTO;
	}
	return (int64_t)n;
}

static void shm_rx_consume(struct shm_conn *sc, size_t n)
{
	sc->rx_tail += n;
	shm_local_release(sc);
	atomic_store_explicit(&sc->rx.ctl->tail, sc->rx_tail,
			      memory_order_release);
}

/* Check a CMA frame's table against the header. */
static int shm_rx_check_table(struct shm_conn *sc)
{
	uint64_t sum = 0;
	uint32_t i;

	for (i = 0; i < sc->niov; i++) {
		if (sc->riov[i].len > UINT64_MAX - sum)
			return -EPROTO;
		sum += sc->riov[i].len;
	}
	return sum == sc->hdr.length && sum >= SHM_CMA_MIN ? 0 : -EPROTO;
}

/* A placed payload (SHM_PLACED) must be posted whole at the tail and
 * not wrap; then it may be read in place. */
static int shm_rx_check_placed(struct shm_conn *sc)
{
	int64_t avail = shm_rx_avail(sc);
	uint64_t off = sc->rx_tail & (SHM_RING_SIZE - 1);

	if (sc->hdr.length > SHM_PLACE_MAX || avail < 0 ||
	    (uint64_t)avail < sc->hdr.length ||
	    off + sc->hdr.length > SHM_RING_SIZE)
		return -EPROTO;
	if (sc->hdr.length)
		sc->base.rx_inplace = sc->rx.data + off;
	return 0;
}

/* Parse a frame at the ring's tail; 1 when one was taken, 0 when none is
 * complete yet. */
static int shm_rx_frame(struct shm_conn *sc, struct shm_frame *fr)
{
	int64_t avail = shm_rx_avail(sc);
	size_t tlen;

	if (avail < (int64_t)sizeof(*fr))
		return avail < 0 ? (int)avail : 0;
	shm_ring_get(sc->rx.data, sc->rx_tail, fr, sizeof(*fr));
	if ((fr->mode != SHM_INLINE && fr->mode != SHM_CMA &&
	     fr->mode != SHM_CMA_ASYNC && fr->mode != SHM_PLACED) ||
	    (fr->mode == SHM_INLINE && fr->niov) ||
	    (fr->mode == SHM_PLACED ? fr->niov >= SHM_RING_SIZE / 2
				    : fr->niov > SHM_MAX_IOV)) {
		psd_err("dropping connection from %s: bad frame (mode %u, "
			"%u iovecs or padding)",
			sc->base.peer, fr->mode, fr->niov);
		return -EPROTO;
	}
	if (fr->mode == SHM_PLACED) {
		/* Frame, padding and payload are posted together. */
		if ((uint64_t)avail < sizeof(*fr) + fr->niov)
			return 0;
		shm_rx_consume(sc, sizeof(*fr) + fr->niov);
		sc->mode = fr->mode;
		sc->niov = fr->niov;
		return 1;
	}
	tlen = fr->niov * sizeof(struct shm_riov);
	if ((uint64_t)avail < sizeof(*fr) + tlen)
		return 0; /* frames are posted whole: a broken peer */
	shm_ring_get(sc->rx.data, sc->rx_tail + sizeof(*fr), sc->riov, tlen);
	shm_rx_consume(sc, sizeof(*fr) + tlen);
	sc->mode = fr->mode;
	sc->niov = fr->niov;
	return 1;
}

/* A frame: validate its header and ask the van where the payload goes. */
static int shm_rx_header(struct shm_conn *sc)
{
	struct shm_frame fr;
	const char *why;
	void *dst = NULL;
	int ret;

	sc->base.rx_inplace = NULL;
	ret = shm_rx_frame(sc, &fr);
	if (ret <= 0)
		return ret;
	ret = psd_hdr_decode(fr.hdr, psd_van_max_tensor(&sc->base), &sc->hdr,
			     &why);
	if (!ret && sc->mode == SHM_PLACED && shm_rx_check_placed(sc)) {
		why = "placed payload not posted whole and contiguous";
		ret = -EPROTO;
	} else if (!ret && sc->mode != SHM_INLINE && sc->mode != SHM_PLACED &&
		   shm_rx_check_table(sc)) {
		why = "iovec table does not match the length";
		ret = -EPROTO;
	}
	if (ret) {
		psd_err("dropping connection from %s: malformed header: %s",
			sc->base.peer, why);
		return -EPROTO;
	}
	ret = psd_van_rx_header(&sc->base, &sc->hdr, &dst);
	if (ret < 0)
		return ret;
	sc->dst = dst;
	sc->got = 0;
	sc->in_payload = true;
	return 1;
}

static void shm_rx_deliver(struct shm_conn *sc)
{
	sc->in_payload = false;
	psd_van_rx_msg(&sc->base, &sc->hdr, sc->dst);
}

/* Inline payload bytes from the ring; 1 progress, 0 ring empty, -EAGAIN
 * budget spent. */
static int shm_rx_inline(struct shm_conn *sc, size_t *budget)
{
	int64_t avail;
	uint64_t n;

	if (sc->got == sc->hdr.length) {
		shm_rx_deliver(sc);
		return 1;
	}
	avail = shm_rx_avail(sc);
	if (avail <= 0)
		return (int)avail;
	if (!*budget)
		return -EAGAIN;
	n = sc->hdr.length - sc->got;
	n = n < (uint64_t)avail ? n : (uint64_t)avail;
	n = n < *budget ? n : *budget;
	if (sc->dst)
		shm_ring_get(sc->rx.data, sc->rx_tail, sc->dst + sc->got,
			     (size_t)n);
	shm_rx_consume(sc, (size_t)n);
	sc->got += n;
	*budget -= (size_t)n;
	return 1;
}

/* Tell the sender its CMA message is done (@from SHM_NO_STREAM) or that
 * it must stream the payload from byte @from on. */
static void shm_rx_ack(struct shm_conn *sc, uint64_t from)
{
	atomic_store_explicit(&sc->rx.ctl->stream_from, from,
			      memory_order_relaxed);
	shm_local_release(sc);
	atomic_store_explicit(&sc->rx.ctl->acked, ++sc->cma_done,
			      memory_order_release);
	shm_evfd_signal(sc->rx.space_fd);
}

/* CMA payload: copy a piece, or finish; 1 progress, -EAGAIN budget. */
static int shm_rx_cma(struct shm_conn *sc, size_t *budget)
{
	uint64_t n = sc->hdr.length - sc->got;
	ssize_t r;

	if (n && sc->dst) {
		if (!*budget)
			return -EAGAIN;
		n = n < SHM_CMA_CHUNK ? n : SHM_CMA_CHUNK;
		r = psd_shm_cma_read(sc, (size_t)n);
		if (r == -EPERM && sc->mode == SHM_CMA_ASYNC) {
			/* The sender did not wait: it cannot stream. */
			psd_warn("shm: reading a %llu-byte request from %s "
				 "was refused (process_vm_readv: %s; it "
				 "worked when the connection was made); "
				 "dropping the connection",
				 (unsigned long long)sc->hdr.length,
				 sc->base.peer, strerror(EPERM));
			return -ECONNRESET;
		}
		if (r == -EPERM) {
			/* Refused now (it worked at connect): ring mode. */
			psd_shm_cma_warn(sc->peer_pid, (int)r);
			atomic_store(&sc->rx.ctl->cma_ok, 0);
			sc->mode = SHM_INLINE;
			shm_rx_ack(sc, sc->got);
			return 1;
		}
		if (r < 0) {
			psd_warn("shm: reading a %llu-byte message from %s "
				 "failed: %s; dropping the connection",
				 (unsigned long long)sc->hdr.length,
				 sc->base.peer, strerror((int)-r));
			return -ECONNRESET; /* the sender is gone */
		}
		sc->got += (uint64_t)r;
		*budget = (size_t)r < *budget ? *budget - (size_t)r : 0;
		return 1;
	}
	/* A sender that gave up (closed, killed) while we copied may have
	 * reused its buffer: what we read is not its message. */
	if (sc->dst && shm_is_down(sc))
		return -ECONNRESET;
	sc->got = sc->hdr.length;
	shm_rx_ack(sc, SHM_NO_STREAM);
	shm_rx_deliver(sc);
	return 1;
}

/* A placed payload: copied out unless the consumer reads it in place,
 * delivered, then its ring space is freed. */
static int shm_rx_placed(struct shm_conn *sc, size_t *budget)
{
	size_t len = (size_t)sc->hdr.length;

	if (sc->dst && sc->dst != sc->base.rx_inplace)
		memcpy(sc->dst, sc->base.rx_inplace, len);
	sc->got = len;
	*budget = len < *budget ? *budget - len : 0;
	shm_rx_deliver(sc);
	sc->base.rx_inplace = NULL;
	shm_rx_consume(sc, len);
	return 1;
}

static int shm_rx_step(struct shm_conn *sc, size_t *budget)
{
	if (!sc->in_payload)
		return shm_rx_header(sc);
	if (sc->mode == SHM_PLACED)
		return shm_rx_placed(sc, budget);
	if (sc->mode != SHM_INLINE)
		return shm_rx_cma(sc, budget);
	return shm_rx_inline(sc, budget);
}

static int shm_progress(struct psd_conn *c)
{
	struct shm_conn *sc = to_shm(c);
	size_t budget = SHM_RX_BUDGET;
	uint64_t tail0 = sc->rx_tail;
	int ret;

	if (atomic_load(&sc->hello_wait)) {
		ret = psd_shm_accept_finish(sc);
		if (ret || atomic_load(&sc->hello_wait))
			return ret;
	}
	shm_evfd_clear(sc->rx.data_fd);
	for (;;) {
		if (atomic_load(&c->closed)) {
			ret = -ECONNRESET;
			break;
		}
		ret = shm_rx_step(sc, &budget);
		if (ret > 0)
			continue;
		if (ret == -EAGAIN) {
			shm_evfd_signal(sc->rx.data_fd); /* more to do */
			ret = 0;
			break;
		}
		if (ret < 0)
			break;
		/* Nothing posted.  Gone peer: drain what it posted before. */
		if (sc->hup) {
			ret = -ECONNRESET;
			break;
		}
		if (!shm_is_down(sc))
			break;
		sc->hup = true;
	}
	if (sc->rx_tail != tail0)
		shm_evfd_signal(sc->rx.space_fd); /* room for the sender */
	return ret;
}

static void shm_close(struct psd_conn *c)
{
	struct shm_conn *sc = to_shm(c);

	/* Both vans and a blocked sender see the hang-up. */
	if (sc->sock >= 0)
		shutdown(sc->sock, SHUT_RDWR);
}

static void shm_fini(struct psd_conn *c)
{
	struct shm_conn *sc = to_shm(c);
	int i;

	if (!sc->inited)
		return;
	if (sc->map)
		munmap(sc->map, SHM_MAP_SIZE);
	sc->map = NULL;
	shm_close_fd(&c->fd);
	shm_close_fd(&sc->sock);
	for (i = 0; i < 4; i++)
		shm_close_fd(&sc->evfd[i]);
}

const struct psd_transport_ops psd_shm_ops = {
	.name = "shm",
	.conn_size = sizeof(struct shm_conn),
	.req_send_early = true,
	.listen = psd_shm_listen,
	.accept = psd_shm_accept,
	.listen_close = psd_shm_listen_close,
	.connect = psd_shm_connect,
	.send = shm_send,
	.send_fill = shm_send_fill,
	.progress = shm_progress,
	.close = shm_close,
	.fini = shm_fini,
};
