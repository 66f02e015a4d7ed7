// SPDX-License-Identifier: MIT
/*
 * Application messages (psched_app_send(), include/psched.h): a head and
 * a body from any node to any node, on the scheduler links.  A worker or
 * server sends on its link to the scheduler, which forwards to the
 * receiver (scheduler/scheduler.c; it vouches for the sender's id); the
 * scheduler sends on the receiver's link; a message to oneself is handed
 * to the handler on the spot.
 */
#include <stdlib.h>
#include <string.h>

#include "node.h"

/* The process's handler, for nodes without their own: set before
 * psched_node_create(), it is there before the first message. */
static pthread_mutex_t app_default_lock = PTHREAD_MUTEX_INITIALIZER;
static psched_app_handler_fn *app_default_fn;
static void *app_default_arg;

int psched_set_app_handler(struct psched_node *n, psched_app_handler_fn *fn,
			   void *arg)
{
	if (!n) {
		pthread_mutex_lock(&app_default_lock);
		app_default_fn = fn;
		app_default_arg = arg;
		pthread_mutex_unlock(&app_default_lock);
		return 0;
	}
	pthread_mutex_lock(&n->lock);
	n->app_fn = fn;
	n->app_arg = arg;
	pthread_mutex_unlock(&n->lock);
	return 0;
}

void psd_app_deliver(struct psched_node *n, int from,
		     const Psched__AppMessage *m)
{
	struct psched_app_msg msg = {
		.from = from,
		.to = m->to,
		.request = m->request,
		.head = m->head,
		.body = m->body.data,
		.len = m->body.len,
		.app_id = m->app_id,
		.customer_id = m->customer_id,
		.timestamp = m->timestamp,
	};
	psched_app_handler_fn *fn;
	void *arg;

	pthread_mutex_lock(&n->lock);
	fn = n->app_fn;
	arg = n->app_arg;
	pthread_mutex_unlock(&n->lock);
	if (!fn) {
		pthread_mutex_lock(&app_default_lock);
		fn = app_default_fn;
		arg = app_default_arg;
		pthread_mutex_unlock(&app_default_lock);
	}
	if (!fn) {
		psd_debug("dropping application message %d from node %d: no "
			  "handler",
			  m->head, from);
		return;
	}
	fn(n, &msg, arg);
}

/* Is @id a node of @n's job? */
static bool app_is_node(const struct psched_node *n, int id)
{
	return id >= 0 && (unsigned)id <= n->num_server + n->num_worker;
}

int psched_app_send(struct psched_node *n, const struct psched_app_msg *msg)
{
	Psched__AppMessage a = PSCHED__APP_MESSAGE__INIT;
	Psched__Control m = PSCHED__CONTROL__INIT;
	int ret;

	if (!n || !msg)
		return psd_set_errmsg(-EINVAL, "app message: no %s",
				      n ? "message" : "node");
	if (!app_is_node(n, msg->to))
		return psd_set_errmsg(-EINVAL,
				      "app message to node %d: no "
				      "such node",
				      msg->to);
	if (msg->len > PSCHED_APP_MAX_BODY || (msg->len && !msg->body))
		return psd_set_errmsg(-EINVAL,
				      "app message of %zu bytes: at most %u, "
				      "and a body",
				      msg->len, PSCHED_APP_MAX_BODY);
	a.from = n->id;
	a.to = msg->to;
	a.request = msg->request;
	a.head = msg->head;
	a.body.data = (uint8_t *)(uintptr_t)msg->body;
	a.body.len = msg->len;
	a.app_id = msg->app_id;
	a.customer_id = msg->customer_id;
	a.timestamp = msg->timestamp;
	if (msg->to == n->id) {
		psd_app_deliver(n, n->id, &a);
		return 0;
	}
	m.body_case = PSCHED__CONTROL__BODY_APP;
	m.app = &a;
	if (n->role && n->role->app_send)
		ret = n->role->app_send(n, msg->to, &m);
	else
		ret = psd_node_send_sched(n, &m);
	if (ret)
		return psd_set_errmsg(ret, "app message to node %d: %s",
				      msg->to, psched_strerror(ret));
	return 0;
}
