// SPDX-License-Identifier: MIT
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>
#include <sched.h>

#include "scratch.h"
#include "van.h"

#include "van_int.h"

/* Milliseconds between two log lines of one kind of flood. */
#define VAN_RL_MS 5000u
/* The largest message after which the van loop busy-polls (van_wait()). */
#define VAN_POLL_MSG_MAX (64u * 1024u)
/* How long accept pauses after EMFILE/ENFILE. */
#define VAN_EMFILE_PAUSE 200u

/* True when a line may be logged now; else count it as suppressed. */
static bool van_rl_ok(struct van_ratelimit *rl, uint64_t now,
		      unsigned *suppressed)
{
	if (now < rl->next_ms) {
		rl->suppressed++;
		return false;
	}
	rl->next_ms = now + VAN_RL_MS;
	*suppressed = rl->suppressed;
	rl->suppressed = 0;
	return true;
}

/* The epoll cookie for the eventfd and the listener. */
static char van_tag_wake;
static char van_tag_listen;
static char van_tag_listen2;

int psd_van_create(const struct psd_van_opts *o, const struct psd_van_cb *cb,
		   struct psd_van **out)
{
	struct epoll_event ev = { .events = EPOLLIN };
	struct psd_van *van;
	int ret;

	van = calloc(1, sizeof(*van));
	if (!van)
		return -ENOMEM;
	van->ops = o->ops;
	van->cb = *cb;
	van->max_tensor = o->max_tensor;
	van->send_timeout_ms = o->send_timeout_ms;
	psd_transport_knobs_init(&van->knobs, o->cfg);
	van->auth_timeout_ms = o->cfg ? o->cfg->auth_timeout_ms : 5000;
	psd_poll_budget_init(&van->poll, o->cfg ? o->cfg->poll_us : 0);
	van->preauth_max_frame = o->cfg ? o->cfg->preauth_max_frame : 4096;
	van->max_pending = o->cfg ? o->cfg->max_pending_auth : 128;
	van->trusted = o->trusted;
	van->spare_fd = -1;
	van->lis.fd = -1;
	van->lis2.fd = -1;
	pthread_mutex_init(&van->lock, NULL);
	psd_list_init(&van->conns);
	van->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (van->epfd < 0) {
		ret = psd_neg_errno();
		goto err_free;
	}
	van->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (van->evfd < 0) {
		ret = psd_neg_errno();
		goto err_close_ep;
	}
	ev.data.ptr = &van_tag_wake;
	if (epoll_ctl(van->epfd, EPOLL_CTL_ADD, van->evfd, &ev)) {
		ret = psd_neg_errno();
		goto err_close_ev;
	}
	*out = van;
	return 0;

err_close_ev:
	close(van->evfd);
err_close_ep:
	close(van->epfd);
err_free:
	pthread_mutex_destroy(&van->lock);
	free(van);
	return ret;
}

int psd_van_listen(struct psd_van *van, const struct psd_addr *addr,
		   unsigned *port)
{
	struct epoll_event ev = { .events = EPOLLIN };
	int ret;

	van->lis.ops = van->ops;
	van->lis.knobs = &van->knobs;
	ret = van->ops->listen(&van->lis, addr);
	if (ret)
		return ret;
	ev.data.ptr = &van_tag_listen;
	if (epoll_ctl(van->epfd, EPOLL_CTL_ADD, van->lis.fd, &ev)) {
		ret = psd_neg_errno();
		van->ops->listen_close(&van->lis);
		return ret;
	}
	van->listening = true;
	*port = van->lis.port;
	van->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	return 0;
}

int psd_van_listen_also(struct psd_van *van,
			const struct psd_transport_ops *ops,
			const struct psd_addr *addr, unsigned *port)
{
	struct epoll_event ev = { .events = EPOLLIN,
				  .data.ptr = &van_tag_listen2 };
	int ret;

	van->lis2.ops = ops;
	van->lis2.knobs = &van->knobs;
	ret = ops->listen(&van->lis2, addr);
	if (ret)
		return ret;
	if (epoll_ctl(van->epfd, EPOLL_CTL_ADD, van->lis2.fd, &ev)) {
		ret = psd_neg_errno();
		ops->listen_close(&van->lis2);
		return ret;
	}
	van->listening2 = true;
	*port = van->lis2.port;
	return 0;
}

static struct psd_conn *van_conn_alloc(struct psd_van *van,
				       const struct psd_transport_ops *ops)
{
	struct psd_conn *c = calloc(1, ops->conn_size);

	if (!c)
		return NULL;
	c->ops = ops;
	c->van = van;
	c->fd = -1;
	c->peer_id = -1;
	c->born_ms = psd_now_ms();
	atomic_init(&c->authed, van->trusted);
	atomic_init(&c->refs, 1);
	atomic_init(&c->closed, false);
	atomic_init(&c->pair, NULL);
	pthread_mutex_init(&c->send_lock, NULL);
	pthread_mutex_init(&c->rx_lock, NULL);
	atomic_init(&c->rx_err, 0);
	psd_list_init(&c->link);
	return c;
}

void psd_conn_get(struct psd_conn *c)
{
	atomic_fetch_add(&c->refs, 1);
}

/* Give back the block lent for the last message, unless taken. */
static void conn_rx_own_drop(struct psd_conn *c)
{
	psd_scratch_put(&psd_raw_blocks, c->rx_own);
	c->rx_own = NULL;
}

void psd_conn_put(struct psd_conn *c)
{
	if (!c || atomic_fetch_sub(&c->refs, 1) != 1)
		return;
	c->ops->fini(c);
	pthread_mutex_destroy(&c->send_lock);
	pthread_mutex_destroy(&c->rx_lock);
	free(c->scratch);
	conn_rx_own_drop(c);
	free(c->auth_msg);
	free(c);
}

/* Put @c in the loop; the list holds the reference we were created with
 * and the caller gets one more. */
static int van_conn_add(struct psd_van *van, struct psd_conn *c)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = c };

	pthread_mutex_lock(&van->lock);
	psd_list_add_tail(&van->conns, &c->link);
	c->in_list = true;
	pthread_mutex_unlock(&van->lock);
	if (epoll_ctl(van->epfd, EPOLL_CTL_ADD, c->fd, &ev))
		return psd_neg_errno();
	return 0;
}

/* Van thread: take @c out of the loop and stop it. */
static void van_conn_silence(struct psd_van *van, struct psd_conn *c)
{
	atomic_store(&c->closed, true);
	epoll_ctl(van->epfd, EPOLL_CTL_DEL, c->fd, NULL);
	c->ops->close(c);
}

/* @c is closed: wait until no caller is in psd_conn_rx_wait() on it. */
static void van_rx_quiesce(struct psd_conn *c)
{
	pthread_mutex_lock(&c->rx_lock);
	pthread_mutex_unlock(&c->rx_lock);
}

/* Van thread: forget @c for good, and the other connection of its split
 * pair: both are silenced before either's closed callback, so that no
 * message arrives on one after the owner heard the other is gone. */
static void van_conn_drop(struct psd_van *van, struct psd_conn *c, int err)
{
	struct psd_conn *pair = atomic_load(&c->pair);

	if (c->accepted && !atomic_load(&c->authed)) {
		c->accepted = false;
		atomic_fetch_sub(&van->npending, 1);
	}
	van_conn_silence(van, c);
	if (pair)
		van_conn_silence(van, pair);
	/* A caller receiving on either itself (psd_conn_rx_wait()) stops at
	 * its next look, which finds it closed (the shutdown wakes its
	 * poll): wait for that, so that nothing it reads lands after the
	 * closed callback failed the requests. */
	van_rx_quiesce(c);
	if (pair)
		van_rx_quiesce(pair);
	pthread_mutex_lock(&van->lock);
	if (!c->in_list) {
		pthread_mutex_unlock(&van->lock);
		return;
	}
	psd_list_del(&c->link);
	c->in_list = false;
	pthread_mutex_unlock(&van->lock);
	if (van->cb.closed)
		van->cb.closed(van->cb.arg, c, err);
	if (pair)
		van_conn_drop(van, pair, err);
	psd_conn_put(c);
}

void psd_conn_set_authed(struct psd_conn *c)
{
	if (atomic_exchange(&c->authed, true))
		return;
	if (c->accepted) {
		c->accepted = false;
		atomic_fetch_sub(&c->van->npending, 1);
	}
}

void psd_conn_close(struct psd_conn *c)
{
	struct psd_conn *pair = atomic_load(&c->pair);

	atomic_store(&c->closed, true);
	c->ops->close(c);
	if (pair) {
		atomic_store(&pair->closed, true);
		pair->ops->close(pair);
	}
}

void psd_conn_pair(struct psd_conn *req, struct psd_conn *ans, bool tx_to_pair)
{
	/* Each holds the other until psd_conn_unpair(): whichever the van
	 * drops first, the other's pointer stays valid. */
	psd_conn_get(ans);
	psd_conn_get(req);
	req->tx_to_pair = tx_to_pair;
	atomic_store(&ans->pair, req);
	atomic_store(&req->pair, ans);
	/* One of them may have gone before it knew of the other. */
	if (atomic_load(&req->closed) || atomic_load(&ans->closed))
		psd_conn_close(req);
}

void psd_conn_unpair(struct psd_conn *c)
{
	struct psd_conn *p = c ? atomic_exchange(&c->pair, NULL) : NULL;

	if (!p)
		return;
	atomic_store(&p->pair, NULL);
	psd_conn_put(p);
	psd_conn_put(c);
}

int psd_van_connect(struct psd_van *van, const struct psd_addr *addr,
		    unsigned timeout_ms, const char *peer_desc,
		    struct psd_conn **out)
{
	return psd_van_connect_via(van, van->ops, addr, timeout_ms, peer_desc,
				   out);
}

int psd_van_connect_via(struct psd_van *van,
			const struct psd_transport_ops *ops,
			const struct psd_addr *addr, unsigned timeout_ms,
			const char *peer_desc, struct psd_conn **out)
{
	struct psd_conn *c = van_conn_alloc(van, ops);
	int ret;

	if (!c)
		return -ENOMEM;
	snprintf(c->peer, sizeof(c->peer), "%s (%s:%u)", peer_desc, addr->host,
		 addr->port);
	ret = ops->connect(c, addr, timeout_ms);
	if (ret) {
		psd_conn_put(c);
		return ret;
	}
	psd_conn_get(c); /* the caller's */
	ret = van_conn_add(van, c);
	if (ret) {
		psd_conn_put(c);
		van_conn_drop(van, c, ret);
		return ret;
	}
	*out = c;
	return 0;
}

void *psd_conn_scratch(struct psd_conn *c, size_t len)
{
	void *p;

	if (len <= c->scratch_cap)
		return c->scratch;
	p = realloc(c->scratch, len);
	if (!p)
		return NULL;
	c->scratch = p;
	c->scratch_cap = len;
	return p;
}

void *psd_conn_rx_block(struct psd_conn *c, size_t len)
{
	/* psd_van_rx_header() gave back the last message's block. */
	if (len < PSD_SCRATCH_MIN_BYTES || c->rx_direct)
		return NULL;
	c->rx_own = psd_scratch_get(&psd_raw_blocks, len);
	return c->rx_own;
}

void psd_raw_msg_layout(struct psched_raw_msg *m, const struct psd_hdr *h,
			const void *payload, const struct psd_conn *c)
{
	const uint8_t *p = payload;

	m->nkeys = (size_t)h->part;
	m->nbytes = h->span;
	if (m->nkeys && !(h->offset & PSD_RAW_ASKED)) {
		m->keys = (const uint64_t *)p;
		p += m->nkeys * 8;
	}
	if (m->nkeys && h->offset & PSD_RAW_LENS) {
		m->lens = (const uint32_t *)p;
		p += m->nkeys * 4;
	}
	m->vals = m->nbytes ? p : NULL;
	if (payload && payload == c->rx_own)
		m->hold_ = c;
}

void *psched_raw_keep(const struct psched_raw_msg *m)
{
	struct psd_conn *c =
		(struct psd_conn *)(uintptr_t)(m ? m->hold_ : NULL);
	void *b;

	if (!c)
		return NULL;
	b = c->rx_own;
	c->rx_own = NULL;
	return b;
}

uint64_t psd_van_max_tensor(const struct psd_conn *c)
{
	return c->van->max_tensor;
}

const struct psd_transport_knobs *psd_van_knobs(const struct psd_van *van)
{
	return &van->knobs;
}

int psd_van_rx_header(struct psd_conn *c, const struct psd_hdr *h, void **dst)
{
	struct psd_van *van = c->van;
	int ret;

	*dst = NULL;
	c->rx_dev = false;
	conn_rx_own_drop(c);
	if (!atomic_load(&c->authed)) {
		if (h->type != PSD_MSG_CONTROL) {
			psd_err("dropping connection from %s: %s message "
				"before authenticating",
				c->peer, psd_msg_type_name(h->type));
			return -EACCES;
		}
		if (h->length > van->preauth_max_frame) {
			psd_err("dropping connection from %s: %llu-byte "
				"control message before authenticating (at "
				"most %u until then, PS_PREAUTH_MAX_FRAME)",
				c->peer, (unsigned long long)h->length,
				van->preauth_max_frame);
			return -EACCES;
		}
	}
	if (h->type != PSD_MSG_CONTROL && van->cb.rx_header) {
		ret = van->cb.rx_header(van->cb.arg, c, h, dst);
		if (ret == PSD_RX_DISCARD)
			*dst = NULL;
		if (ret)
			return ret;
	}
	/* psd_hdr_decode() lets requests over the limit through for the
	 * role to refuse (and discard); one it did not refuse goes no
	 * further. */
	if (h->type != PSD_MSG_CONTROL && h->total > van->max_tensor) {
		psd_err("dropping connection from %s: %s of key %llu is %llu "
			"bytes, above PS_MAX_TENSOR_BYTES %llu",
			c->peer, psd_msg_type_name(h->type),
			(unsigned long long)h->key,
			(unsigned long long)h->total,
			(unsigned long long)van->max_tensor);
		return -EPROTO;
	}
	if (!*dst && h->length) {
		*dst = psd_conn_scratch(c, (size_t)h->length);
		if (!*dst) {
			psd_err("no memory for a %llu-byte message from %s",
				(unsigned long long)h->length, c->peer);
			return -ENOMEM;
		}
	}
	return 0;
}

void psd_van_rx_msg(struct psd_conn *c, const struct psd_hdr *h, void *payload)
{
	struct psd_van *van = c->van;
	Psched__Control *msg;

	atomic_fetch_add(&van->rx_bytes, h->length);
	atomic_fetch_add(&van->rx_msgs, 1);
	if (h->type != PSD_MSG_CONTROL) {
		if (van->cb.rx_data)
			van->cb.rx_data(van->cb.arg, c, h, payload);
		conn_rx_own_drop(c);
		return;
	}
	msg = psched__control__unpack(NULL, (size_t)h->length, payload);
	if (!msg || msg->body_case == PSCHED__CONTROL__BODY__NOT_SET) {
		psd_err("dropping connection from %s: control message of %llu "
			"bytes is not a valid psched.Control protobuf",
			c->peer, (unsigned long long)h->length);
		if (msg)
			psched__control__free_unpacked(msg, NULL);
		psd_conn_close(c);
		return;
	}
	if (van->cb.rx_control)
		van->cb.rx_control(van->cb.arg, c, msg);
	psched__control__free_unpacked(msg, NULL);
}

/* Take the listener out of epoll until @resume_ms (and, for the pending
 * cap, until fewer connections wait to authenticate). */
static void van_listen_pause(struct psd_van *van, uint64_t resume_ms)
{
	if (!van->lis_paused) {
		epoll_ctl(van->epfd, EPOLL_CTL_DEL, van->lis.fd, NULL);
		if (van->listening2)
			epoll_ctl(van->epfd, EPOLL_CTL_DEL, van->lis2.fd, NULL);
	}
	van->lis_paused = true;
	van->lis_resume_ms = resume_ms;
}

static void van_listen_maybe_resume(struct psd_van *van, uint64_t now)
{
	struct epoll_event ev = { .events = EPOLLIN,
				  .data.ptr = &van_tag_listen };

	if (!van->lis_paused || now < van->lis_resume_ms ||
	    atomic_load(&van->npending) >= van->max_pending)
		return;
	if (epoll_ctl(van->epfd, EPOLL_CTL_ADD, van->lis.fd, &ev) &&
	    errno != EEXIST) {
		van->lis_resume_ms = now + VAN_EMFILE_PAUSE;
		return;
	}
	ev.data.ptr = &van_tag_listen2;
	if (van->listening2 &&
	    epoll_ctl(van->epfd, EPOLL_CTL_ADD, van->lis2.fd, &ev) &&
	    errno != EEXIST) {
		epoll_ctl(van->epfd, EPOLL_CTL_DEL, van->lis.fd, NULL);
		van->lis_resume_ms = now + VAN_EMFILE_PAUSE;
		return;
	}
	van->lis_paused = false;
}

/*
 * Out of descriptors: give up the spare one, accept the oldest pending
 * connection and close it at once (so the kernel stops reporting the
 * listener ready), take the spare back, and pause accepting for a while.
 * Logged once per VAN_RL_MS, never a busy loop.
 */
static void van_accept_emfile(struct psd_van *van, struct psd_listener *lis,
			      int err)
{
	uint64_t now = psd_now_ms();
	unsigned skipped;
	int fd;

	if (van->spare_fd >= 0) {
		close(van->spare_fd);
		fd = accept4(lis->fd, NULL, NULL, SOCK_CLOEXEC);
		if (fd >= 0)
			close(fd);
		van->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	}
	van_listen_pause(van, now + VAN_EMFILE_PAUSE);
	if (van_rl_ok(&van->rl_accept, now, &skipped))
		psd_err("accept on port %u failed: %s; closing new connections "
			"and pausing accept for %u ms at a time (%u more "
			"failures in the last %u s; raise ulimit -n)",
			lis->port, psched_strerror(err), VAN_EMFILE_PAUSE,
			skipped, VAN_RL_MS / 1000);
}

static void van_accept_all(struct psd_van *van, struct psd_listener *lis)
{
	struct psd_conn *c;
	unsigned skipped;
	int ret;

	for (;;) {
		if (atomic_load(&van->npending) >= van->max_pending) {
			van_listen_pause(van, 0);
			if (van_rl_ok(&van->rl_pending, psd_now_ms(), &skipped))
				psd_warn(
					"%u connections on port %u are "
					"authenticating (PS_MAX_PENDING_AUTH): "
					"newer ones wait in the kernel's "
					"backlog",
					van->max_pending, lis->port);
			return;
		}
		c = van_conn_alloc(van, lis->ops);
		if (!c)
			return;
		psd_set_errmsg(0, "%s", ""); /* the transport may say why */
		ret = lis->ops->accept(lis, c);
		if (ret) {
			psd_conn_put(c);
			if (ret == -EMFILE || ret == -ENFILE ||
			    ret == -ENOBUFS || ret == -ENOMEM)
				van_accept_emfile(van, lis, ret);
			else if (ret != -EAGAIN &&
				 van_rl_ok(&van->rl_accept, psd_now_ms(),
					   &skipped))
				psd_warn("accept failed: %s (%u more in the "
					 "last %u s)",
					 psched_errmsg()[0]
						 ? psched_errmsg()
						 : psched_strerror(ret),
					 skipped, VAN_RL_MS / 1000);
			return;
		}
		c->born_ms = psd_now_ms();
		if (!atomic_load(&c->authed)) { /* trusted vans: born so */
			c->accepted = true;
			atomic_fetch_add(&van->npending, 1);
		}
		if (van_conn_add(van, c)) {
			van_conn_drop(van, c, -EIO);
			continue;
		}
		if (van->cb.accepted)
			van->cb.accepted(van->cb.arg, c);
	}
}

static void van_handle(struct psd_van *van, struct epoll_event *ev)
{
	struct psd_conn *c;
	uint64_t v;
	int ret;

	if (ev->data.ptr == &van_tag_wake) {
		(void)!read(van->evfd, &v, sizeof(v));
		return;
	}
	if (ev->data.ptr == &van_tag_listen) {
		van_accept_all(van, &van->lis);
		return;
	}
	if (ev->data.ptr == &van_tag_listen2) {
		van_accept_all(van, &van->lis2);
		return;
	}
	c = ev->data.ptr;
	if (atomic_load(&c->closed)) { /* its pair went (or the owner) */
		van_conn_drop(van, c, -ECONNRESET);
		return;
	}
	/* A caller receiving on @c itself (psd_conn_rx_wait()) is reading
	 * it: level-triggered, the input is seen again once it is done. */
	if (pthread_mutex_trylock(&c->rx_lock))
		return;
	ret = atomic_load(&c->rx_err);
	if (!ret)
		ret = c->ops->progress(c);
	pthread_mutex_unlock(&c->rx_lock);
	if (ret || atomic_load(&c->closed))
		van_conn_drop(van, c, ret ? ret : -ECONNRESET);
}

int psd_conn_rx_wait(struct psd_conn *c, int wake_fd, bool (*done)(void *),
		     void *arg, unsigned timeout_ms)
{
	struct psd_van *van = c->van;
	struct epoll_event on = { .events = EPOLLIN, .data.ptr = c };
	struct epoll_event off = { .events = 0, .data.ptr = c };
	struct pollfd pfd[2] = { { .fd = c->fd, .events = POLLIN },
				 { .fd = wake_fd, .events = POLLIN } };
	uint64_t end = psd_now_ms() + timeout_ms, now, v;
	int ret = 1, n;

	if (!c->ops->caller_rx || c->fd < 0 || psd_van_is_self(van) ||
	    !atomic_load(&c->authed) || atomic_load(&c->closed) ||
	    (atomic_load(&c->pair) && c->channel != PSD_CHAN_ANS))
		return -EAGAIN;
	if (pthread_mutex_trylock(&c->rx_lock))
		return -EAGAIN; /* the van is in it */
	if (atomic_load(&c->rx_err) ||
	    epoll_ctl(van->epfd, EPOLL_CTL_MOD, c->fd, &off)) {
		pthread_mutex_unlock(&c->rx_lock);
		return -EAGAIN; /* dropped meanwhile */
	}
	while (!done(arg)) {
		now = psd_now_ms();
		if (now >= end) {
			ret = -ETIMEDOUT;
			break;
		}
		n = poll(pfd, 2, (int)(end - now));
		if (n < 0 && errno != EINTR) {
			ret = psd_neg_errno();
			break;
		}
		if (n > 0 && pfd[1].revents)
			(void)!read(wake_fd, &v, sizeof(v));
		if (n <= 0 || !pfd[0].revents)
			continue;
		ret = atomic_load(&c->closed) ? -ECONNRESET
					      : c->ops->progress(c);
		if (ret)
			break;
	}
	/* An error is the van's to act on: it drops @c with it when it
	 * sees the EOF close() makes. */
	if (ret < 0 && ret != -ETIMEDOUT) {
		atomic_store(&c->rx_err, ret);
		c->ops->close(c);
	}
	pthread_mutex_unlock(&c->rx_lock);
	epoll_ctl(van->epfd, EPOLL_CTL_MOD, c->fd, &on);
	return ret;
}

/* Drop accepted connections that did not authenticate in time. */
static void van_auth_deadlines(struct psd_van *van, uint64_t now)
{
	struct psd_conn *late[64];
	struct psd_list *pos;
	unsigned nlate = 0, i, skipped;

	if (!atomic_load(&van->npending))
		return;
	pthread_mutex_lock(&van->lock);
	psd_list_for_each (pos, &van->conns) {
		struct psd_conn *c =
			psd_container_of(pos, struct psd_conn, link);

		if (nlate == PSD_ARRAY_SIZE(late))
			break;
		if (c->accepted && !atomic_load(&c->authed) &&
		    now - c->born_ms > van->auth_timeout_ms) {
			psd_conn_get(c);
			late[nlate++] = c;
		}
	}
	pthread_mutex_unlock(&van->lock);
	for (i = 0; i < nlate; i++) {
		if (van_rl_ok(&van->rl_deadline, now, &skipped))
			psd_warn("dropping connection from %s: not "
				 "authenticated within %u ms (PS_AUTH_TIMEOUT; "
				 "%u more dropped in the last %u s)",
				 late[i]->peer, van->auth_timeout_ms, skipped,
				 VAN_RL_MS / 1000);
		van_conn_drop(van, late[i], -EACCES);
		psd_conn_put(late[i]);
	}
}

/*
 * Wait for events, at most @wait ms.  After a round that received one
 * small message and nothing else (a serial caller's request or its
 * answer), first poll without sleeping (yielding the CPU between polls)
 * for up to the adaptive budget (pollbudget.h, PS_POLL_US): the next one
 * is then taken without the sleep and wake-up of this thread and of its
 * vCPU.  Rounds of several messages (a burst, whose latency the pipeline
 * hides) or of large ones do not poll: there it would only cost CPU.
 */
static int van_wait(struct psd_van *van, struct epoll_event *evs, int max,
		    int wait)
{
	uint64_t t0, end;
	bool polled = false;
	int n = 0;

	if (van->active && van->poll.cur_us && wait) {
		polled = true;
		end = psd_now_us() + van->poll.cur_us;
		do {
			n = epoll_wait(van->epfd, evs, max, 0);
			if (!n)
				sched_yield();
		} while (!n && psd_now_us() < end && !atomic_load(&van->stop));
	}
	if (!n) {
		t0 = psd_now_us();
		n = epoll_wait(van->epfd, evs, max, wait);
		psd_poll_budget_slept(&van->poll, polled, n > 0,
				      psd_now_us() - t0);
	}
	return n;
}

static void *van_thread(void *arg)
{
	struct psd_van *van = arg;
	struct epoll_event evs[64];
	uint64_t next_tick = psd_now_ms() + van->cb.tick_ms;
	uint64_t now, next_check = 0, msgs, bytes;
	int n, i, wait;

	while (!atomic_load(&van->stop)) {
		now = psd_now_ms();
		wait = van->cb.tick_ms
			       ? (int)(next_tick > now ? next_tick - now : 0)
			       : 1000;
		/* Pre-authentication deadlines and a paused listener are
		 * looked at every 100 ms. */
		if ((atomic_load(&van->npending) || van->lis_paused) &&
		    wait > 100)
			wait = 100;
		n = van_wait(van, evs, PSD_ARRAY_SIZE(evs), wait);
		msgs = atomic_load(&van->rx_msgs);
		bytes = atomic_load(&van->rx_bytes);
		for (i = 0; i < n; i++) {
			van_handle(van, &evs[i]);
			psd_van_flush_held(van);
		}
		van->active =
			van->poll.max_us &&
			atomic_load(&van->rx_msgs) - msgs == 1 &&
			atomic_load(&van->rx_bytes) - bytes <=
				VAN_POLL_MSG_MAX &&
			(!van->cb.may_poll || van->cb.may_poll(van->cb.arg));
		now = psd_now_ms();
		if (now >= next_check) {
			next_check = now + 100;
			van_auth_deadlines(van, now);
		}
		van_listen_maybe_resume(van, now);
		if (van->cb.tick_ms && psd_now_ms() >= next_tick) {
			next_tick = psd_now_ms() + van->cb.tick_ms;
			if (van->cb.tick)
				van->cb.tick(van->cb.arg);
			psd_van_flush_held(van);
		}
	}
	psd_van_flush_held(van);
	return NULL;
}

static __thread const struct psd_van *van_self;

static void *van_thread_main(void *arg)
{
	van_self = arg;
	return van_thread(arg);
}

bool psd_van_is_self(const struct psd_van *van)
{
	return van_self == van;
}

int psd_van_start(struct psd_van *van)
{
	int ret = pthread_create(&van->thread, NULL, van_thread_main, van);

	if (ret)
		return -ret;
	pthread_setname_np(van->thread, "ps-van");
	van->started = true;
	return 0;
}

void psd_van_destroy(struct psd_van *van)
{
	struct psd_list *pos;
	struct psd_conn *c;
	uint64_t one = 1;

	if (!van)
		return;
	atomic_store(&van->stop, true);
	(void)!write(van->evfd, &one, sizeof(one));
	if (van->started)
		pthread_join(van->thread, NULL);
	for (;;) {
		pthread_mutex_lock(&van->lock);
		pos = psd_list_empty(&van->conns) ? NULL : van->conns.next;
		pthread_mutex_unlock(&van->lock);
		if (!pos)
			break;
		c = psd_container_of(pos, struct psd_conn, link);
		van_conn_drop(van, c, PSCHED_ESHUTDOWN);
	}
	if (van->listening)
		van->ops->listen_close(&van->lis);
	if (van->listening2)
		van->lis2.ops->listen_close(&van->lis2);
	if (van->spare_fd >= 0)
		close(van->spare_fd);
	close(van->evfd);
	close(van->epfd);
	pthread_mutex_destroy(&van->lock);
	free(van);
}

void psd_van_stats(const struct psd_van *van, uint64_t *tx, uint64_t *rx,
		   uint64_t *txm, uint64_t *rxm)
{
	*tx = atomic_load(&van->tx_bytes);
	*rx = atomic_load(&van->rx_bytes);
	*txm = atomic_load(&van->tx_msgs);
	*rxm = atomic_load(&van->rx_msgs);
}
