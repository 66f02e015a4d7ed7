// SPDX-License-Identifier: MIT
/*
 * Van sends (van.h): header + payload on a connection under its send
 * lock, device payloads, small messages kept aside by the transport
 * (->send_more()) until a flush, the van thread's answers held for one
 * flush per round, and control messages.  A failed send drops the
 * connection.
 */
#include <stdlib.h>

#include "van_int.h"

enum conn_send_how { CONN_SEND, CONN_SEND_DEV, CONN_SEND_MORE };

/* Where a send on @c goes out: a server's sends on the request
 * connection of a split pair go on its answers connection, so that every
 * server -> worker message keeps one order (psd_conn_pair()). */
static struct psd_conn *conn_tx(struct psd_conn *c)
{
	struct psd_conn *pair = atomic_load(&c->pair);

	return pair && c->tx_to_pair ? pair : c;
}

/* A send of @h on @c (where it went out: conn_tx()) returned @ret:
 * count it, or drop @c. */
static int conn_sent(struct psd_conn *c, const struct psd_hdr *h, int ret)
{
	if (ret) {
		psd_warn("send of %s to %s failed: %s; dropping the connection",
			 psd_msg_type_name(h->type), c->peer,
			 psched_strerror(ret));
		psd_conn_close(c);
		return ret;
	}
	atomic_fetch_add(&c->van->tx_bytes, h->length);
	atomic_fetch_add(&c->van->tx_msgs, 1);
	return 0;
}

static int conn_send(struct psd_conn *c, const struct psd_hdr *h,
		     const struct iovec *iov, int niov, enum conn_send_how how)
{
	struct psd_van *van = c->van;
	unsigned t = van->send_timeout_ms;
	int ret;

	c = conn_tx(c);
	if (atomic_load(&c->closed))
		return -ECONNRESET;
	if (how == CONN_SEND_DEV && !c->ops->send_dev)
		return psd_set_errmsg(-EOPNOTSUPP,
				      "the %s transport cannot send device "
				      "memory",
				      c->ops->name);
	pthread_mutex_lock(&c->send_lock);
	if (how == CONN_SEND_DEV)
		ret = c->ops->send_dev(c, h, iov, niov, t);
	else if (how == CONN_SEND_MORE && c->ops->send_more)
		ret = c->ops->send_more(c, h, iov, niov, t);
	else
		ret = c->ops->send(c, h, iov, niov, t);
	pthread_mutex_unlock(&c->send_lock);
	if (ret == -EOPNOTSUPP && how == CONN_SEND_DEV)
		return ret; /* nothing went out: the caller stages it */
	return conn_sent(c, h, ret);
}

int psd_conn_send(struct psd_conn *c, const struct psd_hdr *h,
		  const struct iovec *iov, int niov)
{
	return conn_send(c, h, iov, niov, CONN_SEND);
}

int psd_conn_send_fill(struct psd_conn *c, const struct psd_hdr *h,
		       psd_fill_fn fill, void *arg, void *buf)
{
	struct psd_conn *t = conn_tx(c);
	struct iovec iov = { .iov_base = buf, .iov_len = (size_t)h->length };
	int ret;

	if (atomic_load(&t->closed)) {
		fill(arg, buf, (size_t)h->length); /* runs once */
		return -ECONNRESET;
	}
	if (t->ops->send_fill) {
		pthread_mutex_lock(&t->send_lock);
		ret = t->ops->send_fill(t, h, fill, arg,
					t->van->send_timeout_ms);
		pthread_mutex_unlock(&t->send_lock);
		if (ret != -EMSGSIZE) {
			if (ret) /* not placed: it still runs once */
				fill(arg, buf, (size_t)h->length);
			return conn_sent(t, h, ret);
		}
	}
	fill(arg, buf, (size_t)h->length);
	return conn_send(c, h, &iov, 1, CONN_SEND);
}

int psd_conn_send_dev(struct psd_conn *c, const struct psd_hdr *h,
		      const struct iovec *iov, int niov)
{
	return conn_send(c, h, iov, niov, CONN_SEND_DEV);
}

int psd_conn_send_more(struct psd_conn *c, const struct psd_hdr *h,
		       const struct iovec *iov, int niov)
{
	return conn_send(c, h, iov, niov, CONN_SEND_MORE);
}

int psd_conn_tx_room(struct psd_conn *c, uint32_t *min_rtt_us)
{
	c = conn_tx(c);
	if (!c->ops->tx_room || atomic_load(&c->closed))
		return -EOPNOTSUPP;
	return c->ops->tx_room(c, min_rtt_us);
}

int psd_conn_flush(struct psd_conn *c)
{
	int ret;

	c = conn_tx(c);
	if (!c->ops->flush)
		return 0;
	pthread_mutex_lock(&c->send_lock);
	ret = c->ops->flush(c, c->van->send_timeout_ms);
	pthread_mutex_unlock(&c->send_lock);
	if (ret && !atomic_load(&c->closed)) {
		psd_warn("send to %s failed: %s; dropping the connection",
			 c->peer, psched_strerror(ret));
		psd_conn_close(c);
	}
	return ret;
}

void psd_van_flush_held(struct psd_van *van)
{
	unsigned i;

	for (i = 0; i < van->nheld; i++) {
		psd_conn_flush(van->held[i]);
		psd_conn_put(van->held[i]);
	}
	van->nheld = 0;
}

int psd_conn_reply(struct psd_conn *c, const struct psd_hdr *h,
		   const struct iovec *iov, int niov)
{
	struct psd_van *van = c->van;
	unsigned i;
	int ret;

	c = conn_tx(c);
	if (!c->ops->send_more || !psd_van_is_self(van))
		return psd_conn_send(c, h, iov, niov);
	for (i = 0; i < van->nheld && van->held[i] != c; i++)
		;
	if (i == van->nheld && i == PSD_ARRAY_SIZE(van->held))
		return psd_conn_send(c, h, iov, niov);
	ret = psd_conn_send_more(c, h, iov, niov);
	if (!ret && i == van->nheld) {
		psd_conn_get(c);
		van->held[van->nheld++] = c;
	}
	return ret;
}

int psd_conn_send_control(struct psd_conn *c, int sender,
			  const Psched__Control *msg)
{
	struct psd_hdr h = { .type = PSD_MSG_CONTROL, .sender = sender };
	uint8_t small[512];
	uint8_t *buf = small;
	struct iovec iov;
	size_t len = psched__control__get_packed_size(msg);
	int ret;

	if (len > sizeof(small)) {
		buf = malloc(len);
		if (!buf)
			return -ENOMEM;
	}
	psched__control__pack(msg, buf);
	h.length = len;
	iov.iov_base = buf;
	iov.iov_len = len;
	ret = psd_conn_send(c, &h, &iov, 1);
	if (buf != small)
		free(buf);
	return ret;
}
