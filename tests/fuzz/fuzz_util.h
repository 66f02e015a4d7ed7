/* SPDX-License-Identifier: MIT */
/*
 * Shared by the libFuzzer harnesses (tests/fuzz/fuzz_*.c, `make fuzz`):
 * connections whose sends go nowhere, so that a role's receive hooks can
 * be driven synchronously from the fuzzing thread, and the frame reader
 * that cuts an input into messages.
 *
 * An input is a sequence of frames: PSD_HDR_SIZE header bytes, then the
 * payload (the header's length, at most what is left).  The harness fixes
 * magic, version and the reserved word (fuzz_wire covers those) so that
 * mutations reach the handlers.
 */
#ifndef PSCHED_TESTS_FUZZ_UTIL_H
#define PSCHED_TESTS_FUZZ_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "van.h"
#include "wire.h"

static int fz_sink_send(struct psd_conn *c, const struct psd_hdr *h,
			const struct iovec *iov, int niov, unsigned timeout_ms)
{
	(void)c;
	(void)h;
	(void)iov;
	(void)niov;
	(void)timeout_ms;
	return 0;
}

static void fz_sink_close(struct psd_conn *c)
{
	(void)c;
}

static void fz_sink_fini(struct psd_conn *c)
{
	(void)c;
}

static const struct psd_transport_ops fz_sink_ops = {
	.name = "fuzz-sink",
	.conn_size = sizeof(struct psd_conn),
	.send = fz_sink_send,
	.close = fz_sink_close,
	.fini = fz_sink_fini,
};

/* A connection of @van (never started) to node @peer_id; sends vanish. */
static inline struct psd_conn *fz_conn(struct psd_van *van, int peer_id,
				       const char *desc)
{
	struct psd_conn *c = calloc(1, sizeof(*c));

	if (!c)
		abort();
	c->ops = &fz_sink_ops;
	c->van = van;
	c->fd = -1;
	atomic_init(&c->refs, 1);
	atomic_init(&c->closed, false);
	/* An authenticated peer (common/auth.h): the harness plays one. */
	atomic_init(&c->authed, true);
	pthread_mutex_init(&c->send_lock, NULL);
	c->peer_id = peer_id;
	snprintf(c->peer, sizeof(c->peer), "%s", desc);
	return c;
}

struct fz_reader {
	const uint8_t *p;
	size_t left;
};

/*
 * Next frame of the input into @h and @payload (NULL when the length is
 * 0); false at the end or when the header does not decode (the
 * connection would be dropped there).
 */
static inline bool fz_next(struct fz_reader *r, uint64_t max_tensor,
			   struct psd_hdr *h, const uint8_t **payload)
{
	uint8_t buf[PSD_HDR_SIZE];
	const char *why;

	if (r->left < PSD_HDR_SIZE)
		return false;
	memcpy(buf, r->p, PSD_HDR_SIZE);
	r->p += PSD_HDR_SIZE;
	r->left -= PSD_HDR_SIZE;
	/* magic "PSD1", version 1, reserved 0 */
	memcpy(buf, "PSD1", 4);
	buf[4] = PSD_HDR_VERSION;
	memset(buf + 92, 0, 4);
	if (psd_hdr_decode(buf, max_tensor, h, &why))
		return false;
	if (h->length > r->left)
		return false;
	*payload = h->length ? r->p : NULL;
	r->p += h->length;
	r->left -= h->length;
	return true;
}

/*
 * Deliver one frame to @c as a transport does: the van picks the payload's
 * place (the role's rx_header), the bytes are copied there (or dropped),
 * then the van dispatches the message.  false: the connection would be
 * dropped.
 */
static inline bool fz_deliver(struct psd_conn *c, const struct psd_hdr *h,
			      const uint8_t *payload)
{
	void *dst = NULL;
	int ret;

	if (atomic_load(&c->closed))
		return false;
	ret = psd_van_rx_header(c, h, &dst);
	if (ret < 0)
		return false;
	if (dst && h->length)
		memcpy(dst, payload, (size_t)h->length);
	psd_van_rx_msg(c, h, dst);
	return !atomic_load(&c->closed);
}

#endif
