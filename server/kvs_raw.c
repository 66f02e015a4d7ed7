// SPDX-License-Identifier: MIT
/*
 * KV server: the raw family (PSD_F_RAW, common/wire.h; the worker's side
 * is worker/kvw_raw.c).  A raw request is not stored nor summed here: it
 * goes as it came to the application's raw handler
 * (psched_server_set_raw_handler()), which answers it when it wants,
 * from any thread, with psched_raw_respond().  So a handler holds a call:
 * the request's header and a reference on its connection.
 */
#include <stdlib.h>
#include <string.h>

#include "kvs.h"

struct psched_raw_call {
	struct psd_conn *conn; /* holds a reference */
	struct psd_hdr h;      /* the request */
};

/* The process's handler, for server nodes without their own: set before
 * psched_node_create(), it is there before the first request. */
static pthread_mutex_t raw_default_lock = PTHREAD_MUTEX_INITIALIZER;
static psched_raw_handler_fn *raw_default_fn;
static void *raw_default_arg;

int psched_server_set_raw_handler(struct psched_node *n,
				  psched_raw_handler_fn *fn, void *arg)
{
	struct psd_kvs *s;

	if (!n) {
		pthread_mutex_lock(&raw_default_lock);
		raw_default_fn = fn;
		raw_default_arg = arg;
		pthread_mutex_unlock(&raw_default_lock);
		return 0;
	}
	if (n->cfg.role != PSCHED_ROLE_SERVER || !(s = psd_kvs_of(n)))
		return psd_set_errmsg(-EINVAL, "psched_server_set_raw_handler: "
					       "not a server node");
	pthread_mutex_lock(&n->lock);
	s->raw_fn = fn;
	s->raw_arg = arg;
	pthread_mutex_unlock(&n->lock);
	return 0;
}

/* The handler of @n, or NULL. */
static psched_raw_handler_fn *raw_handler(struct psched_node *n, void **arg)
{
	struct psd_kvs *s = psd_kvs_of(n);
	psched_raw_handler_fn *fn;

	pthread_mutex_lock(&n->lock);
	fn = s->raw_fn;
	*arg = s->raw_arg;
	pthread_mutex_unlock(&n->lock);
	if (fn)
		return fn;
	pthread_mutex_lock(&raw_default_lock);
	fn = raw_default_fn;
	*arg = raw_default_arg;
	pthread_mutex_unlock(&raw_default_lock);
	return fn;
}

/* The header is framed right (psd_hdr_decode()); a big payload goes to a
 * block the handler may keep (psched_raw_keep()), a small one to the
 * connection's scratch buffer, read there by raw_data(). */
static int raw_header(struct psched_node *n, struct psd_conn *c,
		      struct psd_kvs_conn *kc, const struct psd_hdr *h,
		      void **dst)
{
	(void)n;
	(void)kc;
	*dst = psd_conn_rx_block(c, (size_t)h->length);
	return 0;
}

/* Request @h of @c with @payload, as the handler sees it. */
static void raw_msg_of(const struct psd_conn *c, const struct psd_hdr *h,
		       int wrank, const void *payload, struct psched_raw_msg *m)
{
	*m = (struct psched_raw_msg){
		.cmd = (int)h->epoch,
		.tag = h->step,
		.push = psd_msg_is_push(h->type),
		.pull = psd_msg_is_pull(h->type),
		.sender = h->sender,
		.rank = wrank,
		.priority = h->priority,
	};
	psd_raw_msg_layout(m, h, payload, c);
}

/* Refuse raw request @h: logged, the reason and the status sent back. */
static void raw_refuse(struct psched_node *n, struct psd_conn *c,
		       const struct psd_hdr *h, int err, const char *why)
{
	psd_err("refusing raw %s of %llu keys (cmd %d) from %s: %s",
		psd_msg_type_name(h->type), (unsigned long long)h->part,
		(int)h->epoch, c->peer, why);
	psd_kvs_send_error(n, c, h, err, why, false);
	psd_kvs_reply_status(n, c, h, err);
}

static void raw_data(struct psched_node *n, struct psd_conn *c,
		     struct psd_kvs_conn *kc, const struct psd_hdr *h,
		     void *payload)
{
	struct psched_raw_call *call;
	struct psched_raw_msg m;
	psched_raw_handler_fn *fn;
	void *arg;

	fn = raw_handler(n, &arg);
	if (!fn) {
		raw_refuse(n, c, h, -EOPNOTSUPP,
			   "this server has no raw handler "
			   "(psched_server_set_raw_handler())");
		return;
	}
	call = malloc(sizeof(*call));
	if (!call) {
		raw_refuse(n, c, h, -ENOMEM, "no memory for the call");
		return;
	}
	psd_conn_get(c);
	call->conn = c;
	call->h = *h;
	raw_msg_of(c, h, kc->wrank, payload, &m);
	fn(n, call, &m, arg);
}

/* The answer's sizes: 0, or -EINVAL with psched_errmsg() set. */
static int raw_answer_check(const struct psched_raw_call *call,
			    const struct psched_raw_msg *ans)
{
	if (ans->keys_asked && ans->nkeys != call->h.part)
		return psd_set_errmsg(-EINVAL,
				      "raw answer for the keys asked: %zu "
				      "keys, the request had %llu",
				      ans->nkeys,
				      (unsigned long long)call->h.part);
	if (ans->nkeys && !ans->keys)
		return psd_set_errmsg(-EINVAL,
				      "raw answer of %zu keys "
				      "without keys",
				      ans->nkeys);
	if (ans->nbytes && !ans->vals)
		return psd_set_errmsg(-EINVAL,
				      "raw answer of %llu bytes "
				      "without vals",
				      (unsigned long long)ans->nbytes);
	return 0;
}

int psched_raw_respond(struct psched_node *n, struct psched_raw_call *call,
		       const struct psched_raw_msg *ans)
{
	static const struct psched_raw_msg none;
	struct iovec iov[3];
	struct psd_hdr h;
	bool pull;
	int k = 0, ret;

	if (!n || !call)
		return psd_set_errmsg(-EINVAL, "psched_raw_respond: no %s",
				      n ? "call" : "node");
	pull = psd_msg_is_pull(call->h.type);
	if (!ans || !pull)
		ans = &none;
	ret = raw_answer_check(call, ans);
	if (ret)
		goto out;
	h = psd_kvs_answer_hdr(n, &call->h,
			       pull ? PSD_MSG_PULL_RESP : PSD_MSG_PUSH_ACK, 0,
			       PSD_F_RAW, 0);
	h.key = ans->keys_asked ? call->h.key : ans->nkeys ? ans->keys[0] : 0;
	h.part = ans->nkeys;
	h.offset = ans->nkeys && ans->lens ? PSD_RAW_LENS : 0;
	if (ans->nkeys && ans->keys_asked)
		h.offset |= PSD_RAW_ASKED;
	h.total = h.span = ans->nbytes;
	if (!ans->keys_asked)
		psd_iov_add(iov, &k, ans->keys, ans->nkeys * 8);
	if (h.offset & PSD_RAW_LENS)
		psd_iov_add(iov, &k, ans->lens, ans->nkeys * 4);
	psd_iov_add(iov, &k, ans->vals, ans->nbytes);
	h.length = psd_iov_len(iov, k);
	ret = psd_conn_reply(call->conn, &h, iov, k);
	if (ret)
		psd_set_errmsg(ret, "raw answer to %s: %s", call->conn->peer,
			       psched_strerror(ret));
out:
	psd_conn_put(call->conn);
	free(call);
	return ret;
}

static void raw_drop(struct psched_node *n, struct psd_conn *c, int err,
		     const char *why)
{
	/* The handler holds its calls; an answer to a gone worker fails. */
	(void)n;
	(void)c;
	(void)err;
	(void)why;
}

static void raw_fini(struct psched_node *n)
{
	(void)n;
}

const struct psd_kvs_family psd_kvs_raw = {
	.flag = PSD_F_RAW,
	.noun = "raw key",
	.obj = "value list",
	.header = raw_header,
	.data = raw_data,
	.drop = raw_drop,
	.fini = raw_fini,
};
