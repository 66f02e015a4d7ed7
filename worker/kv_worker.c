// SPDX-License-Identifier: MIT
/*
 * KV worker: push / pull / pushpull / init requests.  A request fans out
 * into one message per (key, server range); responses are matched by
 * request id and slot, and pull payloads are received straight into the
 * caller's buffer.  Every wait is bounded and a dead server fails every
 * request that still needs it, naming the server, key and step.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "node.h"
#include "placement.h"

#define KVW_IDX_BITS 24u
#define KVW_IDX_MASK ((1u << KVW_IDX_BITS) - 1u)

struct kvw_key {
	uint64_t key;
	uint64_t total;
	uint8_t dtype;
	uint64_t step;	   /* pushes of this key so far */
	uint64_t last_req; /* duplicate-key check within a request */
	bool used;
};

struct kvw_srv {
	unsigned pending; /* responses still owed by this server */
	unsigned busy;	  /* payload being received from it now */
};

struct kvw_slot {
	uint64_t key;
	uint64_t total;
	uint64_t step;
	uint8_t *dst; /* pull destination, NULL for push */
};

struct kvw_req {
	uint64_t id;
	uint8_t type;
	uint8_t dtype;
	unsigned pending; /* messages not yet answered (+1 while sending) */
	unsigned busy;	  /* receives in progress into caller memory */
	bool done;
	bool cancelled; /* late answers are discarded */
	int err;
	char msg[320];
	psched_done_fn *cb;
	void *cb_arg;
	struct kvw_srv *srv; /* [num_server], indexed by server rank */
	size_t nslots;
	struct kvw_slot slots[];
};

struct psd_kvw {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct kvw_req **reqs; /* by index; id low bits */
	uint32_t *free_idx;
	size_t nfree;
	size_t cap;
	uint64_t gen;
	struct kvw_key *keys; /* open addressing by key */
	size_t kcap;
	size_t kcount;
};

static struct psd_kvw *kvw_of(struct psched_node *n)
{
	return n->app_state;
}

static uint64_t kvw_hash(uint64_t k)
{
	k ^= k >> 33;
	k *= 0xff51afd7ed558ccdull;
	k ^= k >> 33;
	return k;
}

static struct kvw_key *kvw_key_find(struct psd_kvw *w, uint64_t key)
{
	size_t i = (size_t)kvw_hash(key) & (w->kcap - 1);

	while (w->keys[i].used) {
		if (w->keys[i].key == key)
			return &w->keys[i];
		i = (i + 1) & (w->kcap - 1);
	}
	return NULL;
}

static int kvw_key_grow(struct psd_kvw *w)
{
	struct kvw_key *old = w->keys;
	size_t oldcap = w->kcap, i, j;

	w->kcap = oldcap ? oldcap * 2 : 1024;
	w->keys = calloc(w->kcap, sizeof(*w->keys));
	if (!w->keys) {
		w->keys = old;
		w->kcap = oldcap;
		return -ENOMEM;
	}
	for (i = 0; i < oldcap; i++) {
		if (!old[i].used)
			continue;
		j = (size_t)kvw_hash(old[i].key) & (w->kcap - 1);
		while (w->keys[j].used)
			j = (j + 1) & (w->kcap - 1);
		w->keys[j] = old[i];
	}
	free(old);
	return 0;
}

static struct kvw_key *kvw_key_add(struct psd_kvw *w, uint64_t key)
{
	size_t i;

	if ((w->kcount + 1) * 2 > w->kcap && kvw_key_grow(w))
		return NULL;
	i = (size_t)kvw_hash(key) & (w->kcap - 1);
	while (w->keys[i].used)
		i = (i + 1) & (w->kcap - 1);
	w->keys[i].used = true;
	w->keys[i].key = key;
	w->kcount++;
	return &w->keys[i];
}

static struct kvw_req *kvw_req_find(struct psd_kvw *w, uint64_t id)
{
	size_t idx = (size_t)(id & KVW_IDX_MASK);
	struct kvw_req *r;

	if (idx >= w->cap)
		return NULL;
	r = w->reqs[idx];
	return r && r->id == id ? r : NULL;
}

static int kvw_req_register(struct psd_kvw *w, struct kvw_req *r)
{
	size_t i, ncap;

	if (!w->nfree) {
		ncap = w->cap ? w->cap * 2 : 256;
		if (ncap > KVW_IDX_MASK)
			return -EBUSY;
		struct kvw_req **nr = realloc(w->reqs, ncap * sizeof(*nr));
		if (!nr)
			return -ENOMEM;
		w->reqs = nr;
		uint32_t *nf = realloc(w->free_idx, ncap * sizeof(*nf));
		if (!nf)
			return -ENOMEM;
		w->free_idx = nf;
		for (i = w->cap; i < ncap; i++) {
			w->reqs[i] = NULL;
			w->free_idx[w->nfree++] =
				(uint32_t)(ncap - 1 - (i - w->cap));
		}
		w->cap = ncap;
	}
	i = w->free_idx[--w->nfree];
	r->id = (++w->gen << KVW_IDX_BITS) | i;
	w->reqs[i] = r;
	return 0;
}

static void kvw_req_unregister(struct psd_kvw *w, struct kvw_req *r)
{
	size_t idx = (size_t)(r->id & KVW_IDX_MASK);

	if (idx < w->cap && w->reqs[idx] == r) {
		w->reqs[idx] = NULL;
		w->free_idx[w->nfree++] = (uint32_t)idx;
	}
}

/* Lock held.  First error wins; the request completes when nothing is
 * pending. */
static void kvw_req_error(struct kvw_req *r, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void kvw_req_error(struct kvw_req *r, int err, const char *fmt, ...)
{
	va_list ap;

	if (r->err)
		return;
	r->err = err;
	va_start(ap, fmt);
	vsnprintf(r->msg, sizeof(r->msg), fmt, ap);
	va_end(ap);
}

/*
 * Lock held.  One message of @r is answered (or failed).  Returns true if
 * the request just completed and its callback should run (after unlock).
 */
static bool kvw_req_settle(struct psd_kvw *w, struct kvw_req *r, int srank)
{
	if (srank >= 0 && r->srv[srank].pending)
		r->srv[srank].pending--;
	if (r->pending)
		r->pending--;
	if (r->pending || r->done)
		return false;
	r->done = true;
	pthread_cond_broadcast(&w->cond);
	return r->cb != NULL;
}

/* Callback requests free themselves once done and idle. */
static void kvw_req_run_cb(struct psd_kvw *w, struct kvw_req *r)
{
	r->cb(r->err, r->id, r->cb_arg);
	pthread_mutex_lock(&w->lock);
	kvw_req_unregister(w, r);
	pthread_mutex_unlock(&w->lock);
	free(r->srv);
	free(r);
}

static const char *kvw_type_name(uint8_t type)
{
	return psd_msg_type_name(type);
}

int psd_kvw_rx_header(struct psched_node *n, struct psd_conn *c,
		      const struct psd_hdr *h, void **dst);
int psd_kvw_rx_header(struct psched_node *n, struct psd_conn *c,
		      const struct psd_hdr *h, void **dst)
{
	struct psd_kvw *w = kvw_of(n);
	struct psd_peer *p = psd_node_peer(n, c->peer_id);
	struct kvw_req *r;
	struct kvw_slot *s;

	if (!p || p->role != PSCHED_ROLE_SERVER ||
	    (h->type != PSD_MSG_PUSH_ACK && h->type != PSD_MSG_PULL_RESP)) {
		psd_err("dropping connection from %s: unexpected %s message",
			c->peer, psd_msg_type_name(h->type));
		return -EPROTO;
	}
	*dst = NULL;
	if (!h->length)
		return 0;
	pthread_mutex_lock(&w->lock);
	r = kvw_req_find(w, h->req);
	if (r && !r->cancelled && h->slot < r->nslots) {
		s = &r->slots[h->slot];
		if (s->dst && s->key == h->key && s->total == h->total) {
			*dst = s->dst + h->offset;
			r->busy++;
			r->srv[p->rank].busy++;
		}
	}
	pthread_mutex_unlock(&w->lock);
	/* Late or unknown answers land in the scratch buffer. */
	return 0;
}

void psd_kvw_rx_data(struct psched_node *n, struct psd_conn *c,
		     const struct psd_hdr *h, void *payload);
void psd_kvw_rx_data(struct psched_node *n, struct psd_conn *c,
		     const struct psd_hdr *h, void *payload)
{
	struct psd_kvw *w = kvw_of(n);
	struct psd_peer *p = psd_node_peer(n, c->peer_id);
	struct kvw_req *r;
	bool fire = false;

	pthread_mutex_lock(&w->lock);
	r = kvw_req_find(w, h->req);
	if (!r || h->slot >= r->nslots || r->slots[h->slot].key != h->key) {
		pthread_mutex_unlock(&w->lock);
		psd_debug("discarding late %s for request %llu from %s",
			  psd_msg_type_name(h->type),
			  (unsigned long long)h->req, c->peer);
		return;
	}
	if (h->length && r->slots[h->slot].dst && r->srv[p->rank].busy &&
	    payload == r->slots[h->slot].dst + h->offset) {
		r->busy--;
		r->srv[p->rank].busy--;
	}
	if (h->status)
		kvw_req_error(r, h->status,
			      "%s rejected %s of key %llu (step %llu): %s",
			      p->desc, kvw_type_name(r->type),
			      (unsigned long long)h->key,
			      (unsigned long long)r->slots[h->slot].step,
			      psched_strerror(h->status));
	fire = kvw_req_settle(w, r, p->rank);
	if (!r->busy)
		pthread_cond_broadcast(&w->cond);
	pthread_mutex_unlock(&w->lock);
	if (fire)
		kvw_req_run_cb(w, r);
}

/* A server died: fail everything that still needs it. */
static void kvw_peer_failed(struct psched_node *n, struct psd_peer *p, int err,
			    const char *why)
{
	struct psd_kvw *w = kvw_of(n);
	struct kvw_req **fire;
	size_t i, nf = 0;

	if (p->role != PSCHED_ROLE_SERVER)
		return;
	/* No more payload from it lands in caller memory (we are the van
	 * thread, so no receive is in progress right now). */
	if (p->conn)
		psd_conn_close(p->conn);
	pthread_mutex_lock(&w->lock);
	fire = calloc(w->cap + 1, sizeof(*fire));
	for (i = 0; i < w->cap; i++) {
		struct kvw_req *r = w->reqs[i];

		if (!r || !r->srv[p->rank].pending)
			continue;
		kvw_req_error(r, err,
			      "%s of key %llu (step %llu) failed: %s died (%s)",
			      kvw_type_name(r->type),
			      (unsigned long long)r->slots[0].key,
			      (unsigned long long)r->slots[0].step, p->desc,
			      why);
		r->busy -= r->srv[p->rank].busy;
		r->srv[p->rank].busy = 0;
		while (r->srv[p->rank].pending) {
			if (kvw_req_settle(w, r, p->rank) && fire)
				fire[nf++] = r;
		}
	}
	pthread_cond_broadcast(&w->cond);
	pthread_mutex_unlock(&w->lock);
	for (i = 0; i < nf; i++)
		kvw_req_run_cb(w, fire[i]);
	free(fire);
}

/* Lock held.  Check one key of a new request against what this worker
 * knows of it (creating it unless pulling). */
static int kvw_key_check(struct psd_kvw *w, struct psched_node *n, uint8_t type,
			 uint64_t key, uint64_t len, enum psched_dtype dtype,
			 struct kvw_key **out)
{
	const char *tn = kvw_type_name(type);
	struct kvw_key *k;

	if (!len || len % psched_dtype_size(dtype) ||
	    len > n->cfg.max_tensor_bytes)
		return psd_set_errmsg(
			PSCHED_ESIZE,
			"%s of key %llu: length %llu is zero, not "
			"a multiple of the element size or above "
			"PS_MAX_TENSOR_BYTES",
			tn, (unsigned long long)key, (unsigned long long)len);
	k = kvw_key_find(w, key);
	if (!k && type == PSD_MSG_PULL)
		return psd_set_errmsg(PSCHED_EUNKNOWNKEY,
				      "pull of key %llu: the key was never "
				      "pushed or initialised by this worker",
				      (unsigned long long)key);
	if (!k) {
		k = kvw_key_add(w, key);
		if (!k)
			return psd_set_errmsg(-ENOMEM, "no memory for keys");
		k->total = len;
		k->dtype = (uint8_t)dtype;
	}
	if (k->total != len || k->dtype != dtype)
		return psd_set_errmsg(PSCHED_ESIZE,
				      "%s of key %llu: %llu bytes of dtype %d, "
				      "but the key has %llu bytes of dtype %d",
				      tn, (unsigned long long)key,
				      (unsigned long long)len, (int)dtype,
				      (unsigned long long)k->total,
				      (int)k->dtype);
	if (k->last_req == w->gen)
		return psd_set_errmsg(-EINVAL, "%s: key %llu appears twice", tn,
				      (unsigned long long)key);
	k->last_req = w->gen;
	*out = k;
	return 0;
}

/* Lock held.  Validate the keys and build the request; steps are only
 * advanced once every key passed. */
static int kvw_req_build(struct psched_node *n, uint8_t type,
			 const uint64_t *keys, size_t nkeys,
			 void *const *pull_vals, const uint64_t *lens,
			 enum psched_dtype dtype, struct kvw_req **out)
{
	struct psd_kvw *w = kvw_of(n);
	struct kvw_key *k = NULL;
	struct kvw_req *r;
	size_t i;
	int ret;

	if (!nkeys || !keys || !lens || (unsigned)dtype > PSCHED_F16)
		return psd_set_errmsg(-EINVAL,
				      "%s: no keys, no lengths or a bad dtype",
				      kvw_type_name(type));
	r = calloc(1, sizeof(*r) + nkeys * sizeof(r->slots[0]));
	if (!r)
		return -ENOMEM;
	r->srv = calloc(n->num_server, sizeof(*r->srv));
	if (!r->srv) {
		free(r);
		return -ENOMEM;
	}
	r->type = type;
	r->dtype = (uint8_t)dtype;
	r->nslots = nkeys;
	w->gen++;
	for (i = 0; i < nkeys; i++) {
		ret = kvw_key_check(w, n, type, keys[i], lens[i], dtype, &k);
		if (ret) {
			free(r->srv);
			free(r);
			return ret;
		}
		r->slots[i].key = keys[i];
		r->slots[i].total = lens[i];
		r->slots[i].dst = pull_vals ? pull_vals[i] : NULL;
		r->slots[i].step = k->step;
	}
	for (i = 0;
	     i < nkeys && (type == PSD_MSG_PUSH || type == PSD_MSG_PUSHPULL);
	     i++) {
		k = kvw_key_find(w, keys[i]);
		r->slots[i].step = ++k->step;
	}
	*out = r;
	return 0;
}

/* Count the messages of @r and arm the per-server counters (lock held). */
static void kvw_req_arm(struct psched_node *n, struct kvw_req *r)
{
	unsigned esize = psched_dtype_size((enum psched_dtype)r->dtype);
	uint64_t off, len;
	size_t i;
	unsigned s;

	r->pending = 1; /* held while sending */
	for (i = 0; i < r->nslots; i++) {
		for (s = 0; s < n->num_server; s++) {
			psd_place(r->slots[i].key, r->slots[i].total, esize,
				  n->num_server, s, &off, &len);
			if (!len)
				continue;
			r->pending++;
			r->srv[s].pending++;
		}
	}
}

/* Send every message of @r; failures settle their message. */
static void kvw_req_send(struct psched_node *n, struct kvw_req *r,
			 const void *const *vals, int priority, uint8_t flags)
{
	struct psd_kvw *w = kvw_of(n);
	unsigned esize = psched_dtype_size((enum psched_dtype)r->dtype);
	struct psd_hdr h = { .type = r->type,
			     .dtype = r->dtype,
			     .flags = flags,
			     .sender = n->id,
			     .req = r->id,
			     .priority = priority };
	struct iovec iov;
	struct psd_peer *p;
	bool payload = r->type == PSD_MSG_PUSH || r->type == PSD_MSG_PUSHPULL ||
		       (flags & PSD_F_HAS_VALUE);
	size_t i;
	unsigned s;
	int ret;

	for (i = 0; i < r->nslots; i++) {
		h.key = r->slots[i].key;
		h.total = r->slots[i].total;
		h.step = r->slots[i].step;
		h.slot = (uint32_t)i;
		for (s = 0; s < n->num_server; s++) {
			psd_place(h.key, h.total, esize, n->num_server, s,
				  &h.offset, &h.span);
			if (!h.span)
				continue;
			h.length = payload ? h.span : 0;
			iov.iov_base =
				payload ? (char *)(uintptr_t)vals[i] + h.offset
					: NULL;
			iov.iov_len = (size_t)h.length;
			p = psd_node_peer(n, psd_server_id(s));
			ret = p->dead || !p->conn
				      ? PSCHED_ENODEDEAD
				      : psd_conn_send(p->conn, &h, &iov, 1);
			if (!ret)
				continue;
			pthread_mutex_lock(&w->lock);
			if (r->srv[s].pending) {
				kvw_req_error(r, ret,
					      "%s of key %llu (step %llu) to "
					      "%s failed: %s",
					      kvw_type_name(r->type),
					      (unsigned long long)h.key,
					      (unsigned long long)h.step,
					      p->desc, psched_strerror(ret));
				kvw_req_settle(w, r, (int)s);
			}
			pthread_mutex_unlock(&w->lock);
		}
	}
}

static int kvw_issue(struct psched_node *n, uint8_t type, const uint64_t *keys,
		     size_t nkeys, const void *const *push_vals,
		     void *const *pull_vals, const uint64_t *lens,
		     enum psched_dtype dtype, int priority, uint8_t flags,
		     psched_done_fn *cb, void *arg, uint64_t *req)
{
	struct psd_kvw *w = kvw_of(n);
	struct kvw_req *r = NULL;
	bool fire;
	int ret;

	if (!w || n->cfg.role != PSCHED_ROLE_WORKER)
		return psd_set_errmsg(-EINVAL, "only workers push and pull");
	if (!req && !cb)
		return psd_set_errmsg(-EINVAL, "need a request id or callback");
	pthread_mutex_lock(&w->lock);
	if (n->fatal) {
		pthread_mutex_unlock(&w->lock);
		return psd_set_errmsg(n->fatal, "%s", n->fatal_msg);
	}
	ret = kvw_req_build(n, type, keys, nkeys, pull_vals, lens, dtype, &r);
	if (!ret)
		ret = kvw_req_register(w, r);
	if (ret) {
		pthread_mutex_unlock(&w->lock);
		return ret;
	}
	r->cb = cb;
	r->cb_arg = arg;
	kvw_req_arm(n, r);
	if (req)
		*req = r->id;
	pthread_mutex_unlock(&w->lock);
	kvw_req_send(n, r, push_vals, priority, flags);
	pthread_mutex_lock(&w->lock);
	fire = kvw_req_settle(w, r, -1);
	pthread_mutex_unlock(&w->lock);
	if (fire)
		kvw_req_run_cb(w, r);
	return 0;
}

int psched_push(struct psched_node *n, const uint64_t *keys, size_t nkeys,
		const void *const *vals, const uint64_t *lens,
		enum psched_dtype dtype, int priority, psched_done_fn *cb,
		void *arg, uint64_t *req)
{
	if (!vals)
		return psd_set_errmsg(-EINVAL, "push without values");
	return kvw_issue(n, PSD_MSG_PUSH, keys, nkeys, vals, NULL, lens, dtype,
			 priority, 0, cb, arg, req);
}

int psched_pull(struct psched_node *n, const uint64_t *keys, size_t nkeys,
		void *const *vals, const uint64_t *lens,
		enum psched_dtype dtype, int priority, psched_done_fn *cb,
		void *arg, uint64_t *req)
{
	if (!vals)
		return psd_set_errmsg(-EINVAL, "pull without buffers");
	return kvw_issue(n, PSD_MSG_PULL, keys, nkeys, NULL, vals, lens, dtype,
			 priority, 0, cb, arg, req);
}

int psched_pushpull(struct psched_node *n, const uint64_t *keys, size_t nkeys,
		    const void *const *push_vals, void *const *pull_vals,
		    const uint64_t *lens, enum psched_dtype dtype, int priority,
		    psched_done_fn *cb, void *arg, uint64_t *req)
{
	if (!push_vals || !pull_vals)
		return psd_set_errmsg(-EINVAL, "pushpull without buffers");
	return kvw_issue(n, PSD_MSG_PUSHPULL, keys, nkeys, push_vals, pull_vals,
			 lens, dtype, priority, 0, cb, arg, req);
}

int psched_init(struct psched_node *n, const uint64_t *keys, size_t nkeys,
		const void *const *vals, const uint64_t *lens,
		enum psched_dtype dtype, unsigned timeout_ms)
{
	uint64_t req;
	int ret;

	ret = kvw_issue(n, PSD_MSG_INIT, keys, nkeys, vals, NULL, lens, dtype,
			0, n->rank == 0 && vals ? PSD_F_HAS_VALUE : 0, NULL,
			NULL, &req);
	if (ret)
		return ret;
	ret = psched_wait(n, req, timeout_ms);
	if (ret)
		return ret;
	/* Nobody pulls before rank 0's values are in. */
	return psched_barrier(n, PSCHED_GROUP_WORKERS, timeout_ms);
}

/* Lock held: name the servers that still owe answers. */
static void kvw_describe_pending(struct psched_node *n, struct kvw_req *r,
				 char *buf, size_t len)
{
	size_t used = 0;
	unsigned s;

	buf[0] = '\0';
	for (s = 0; s < n->num_server && used + 2 < len; s++) {
		if (!r->srv[s].pending)
			continue;
		used += (size_t)snprintf(
			buf + used, len - used, "%s%s", used ? ", " : "",
			psd_node_peer(n, psd_server_id(s))->desc);
	}
}

/* Lock held.  Give up on @r: later answers are discarded; receives in
 * progress into caller memory are stopped by closing their connection. */
static void kvw_req_cancel(struct psched_node *n, struct kvw_req *r)
{
	struct psd_kvw *w = kvw_of(n);
	unsigned s;

	r->cancelled = true;
	for (s = 0; s < n->num_server; s++)
		if (r->srv[s].busy)
			psd_conn_close(
				psd_node_peer(n, psd_server_id(s))->conn);
	while (r->busy)
		pthread_cond_wait(&w->cond, &w->lock);
}

int psched_wait(struct psched_node *n, uint64_t id, unsigned timeout_ms)
{
	struct psd_kvw *w = kvw_of(n);
	struct timespec ts;
	struct kvw_req *r;
	char who[256];
	int ret = 0;

	if (!w)
		return psd_set_errmsg(-EINVAL, "only workers wait on requests");
	if (!timeout_ms)
		timeout_ms = n->cfg.request_timeout_ms;
	psd_deadline(&ts, timeout_ms);
	pthread_mutex_lock(&w->lock);
	r = kvw_req_find(w, id);
	if (!r || r->cb) {
		pthread_mutex_unlock(&w->lock);
		return psd_set_errmsg(-ENOENT,
				      "no request %llu to wait for "
				      "(already waited, or it has "
				      "a callback)",
				      (unsigned long long)id);
	}
	while (!r->done && !ret)
		ret = pthread_cond_timedwait(&w->cond, &w->lock, &ts);
	if (!r->done) {
		kvw_describe_pending(n, r, who, sizeof(who));
		kvw_req_error(r, -ETIMEDOUT,
			      "%s of key %llu (step %llu%s) timed out after "
			      "%u ms waiting for %s",
			      kvw_type_name(r->type),
			      (unsigned long long)r->slots[0].key,
			      (unsigned long long)r->slots[0].step,
			      r->nslots > 1 ? ", and more keys" : "",
			      timeout_ms, who);
	}
	kvw_req_cancel(n, r);
	kvw_req_unregister(w, r);
	ret = r->err;
	if (ret)
		psd_set_errmsg(ret, "%s", r->msg);
	pthread_mutex_unlock(&w->lock);
	free(r->srv);
	free(r);
	return ret;
}

static int kvw_app_rx_header(struct psched_node *n, struct psd_conn *c,
			     const struct psd_hdr *h, void **dst)
{
	return psd_kvw_rx_header(n, c, h, dst);
}

static void kvw_destroy(struct psched_node *n)
{
	struct psd_kvw *w = kvw_of(n);
	size_t i;

	if (!w)
		return;
	for (i = 0; i < w->cap; i++) {
		if (w->reqs[i]) {
			free(w->reqs[i]->srv);
			free(w->reqs[i]);
		}
	}
	free(w->reqs);
	free(w->free_idx);
	free(w->keys);
	pthread_cond_destroy(&w->cond);
	pthread_mutex_destroy(&w->lock);
	free(w);
	n->app_state = NULL;
}

static const struct psd_app kvw_app = {
	.rx_header = kvw_app_rx_header,
	.rx_data = psd_kvw_rx_data,
	.peer_failed = kvw_peer_failed,
	.destroy = kvw_destroy,
};

int psd_kvw_attach(struct psched_node *n)
{
	struct psd_kvw *w = calloc(1, sizeof(*w));
	pthread_condattr_t ca;

	if (!w)
		return -ENOMEM;
	pthread_mutex_init(&w->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&w->cond, &ca);
	pthread_condattr_destroy(&ca);
	if (kvw_key_grow(w)) {
		free(w);
		return -ENOMEM;
	}
	n->app_state = w;
	n->app = &kvw_app;
	return 0;
}
