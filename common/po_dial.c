// SPDX-License-Identifier: MIT
/*
 * Postoffice, worker side: dialling every server and the hello that
 * authenticates each data connection (auth.h).
 *
 * With PS_TCP_SPLIT=1 (the default) a TCP link to a server is a pair of
 * connections, as in ps-lite's ZeroMQ van, so that each direction is one
 * ordered stream that no send of the other direction waits behind: the
 * request connection (Hello.channel 1, p->conn) carries our requests, the
 * answers connection (channel 2, p->ans) every server -> worker message.
 * The server binds the request connection first and says so (PairReady);
 * only then do we dial the answers connection, which the server binds to
 * it and confirms in turn.  A failure of either drops both (van.h
 * psd_conn_pair()).  shm and rdma links, and PS_TCP_SPLIT=0, keep one
 * connection (channel 0).
 */
#include <stdio.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "node.h"

/* Worker, van thread: a server bound one connection of our split pair. */
void psd_po_on_pair_ready(struct psched_node *n, struct psd_conn *c,
			  const Psched__PairReady *pr)
{
	struct psd_peer *p;
	bool ok;

	pthread_mutex_lock(&n->lock);
	p = psd_node_peer(n, c->peer_id);
	ok = n->cfg.role == PSCHED_ROLE_WORKER && p &&
	     pr->channel == c->channel &&
	     ((c->channel == PSD_CHAN_REQ && c == p->conn && !p->ready_req) ||
	      (c->channel == PSD_CHAN_ANS && c == p->ans && !p->ready_ans));
	if (ok && c->channel == PSD_CHAN_REQ)
		p->ready_req = true;
	else if (ok)
		p->ready_ans = true;
	pthread_cond_broadcast(&n->cond);
	pthread_mutex_unlock(&n->lock);
	if (!ok) {
		psd_err("dropping connection from %s: PairReady for channel "
			"%u on a connection that opened channel %u or is "
			"bound already",
			c->peer, pr->channel, c->channel);
		psd_conn_close(c);
	}
}

/* Our hello on @c to server @p, opening @channel (PSD_CHAN_*). */
static int po_hello(struct psched_node *n, struct psd_peer *p,
		    struct psd_conn *c, unsigned channel)
{
	Psched__Hello hello = PSCHED__HELLO__INIT;
	Psched__Control m = PSCHED__CONTROL__INIT;
	int ret;

	c->peer_id = p->id;
	snprintf(c->peer, sizeof(c->peer), "%s%s", p->desc,
		 channel == PSD_CHAN_ANS ? ", answers" : "");
	/* psd_auth_start() takes c->send_lock after this: the van thread
	 * reads the channel under it when the Challenge comes. */
	c->channel = (uint8_t)channel;
	ret = psd_auth_start(c, n->id);
	if (ret)
		return ret;
	hello.id = n->id;
	hello.nonce.data = c->nonce_mine;
	hello.nonce.len = PSD_AUTH_NONCE_LEN;
	hello.channel = channel;
	m.body_case = PSCHED__CONTROL__BODY_HELLO;
	m.hello = &hello;
	ret = psd_conn_send_control(c, n->id, &m);
	if (ret)
		return psd_set_errmsg(ret, "hello to %s failed: %s", c->peer,
				      psched_strerror(ret));
	return 0;
}

/* n->lock held: @c (p->conn, or with @ans p->ans) is authenticated
 * and, on a split pair, bound by the server. */
static bool po_dial_done(const struct psd_peer *p, const struct psd_conn *c,
			 bool ans)
{
	if (!atomic_load(&c->authed))
		return false;
	if (c->channel == PSD_CHAN_BOTH)
		return true;
	return ans ? p->ready_ans : p->ready_req;
}

/*
 * Wait until every server answered our hello with a valid Challenge (the
 * van thread then sent our proof), and bound the connection if it is one
 * of a split pair, so no request goes to a node that has not proved it
 * belongs to the job.  @ans: the answers connections, else the first.
 */
static int po_wait_servers(struct psched_node *n, uint64_t deadline, bool ans)
{
	const char *what = ans ? "our answers connection (PS_TCP_SPLIT=1)"
			       : "the connection";
	struct timespec ts;
	struct psd_conn *c;
	struct psd_peer *p;
	unsigned i;
	int ret = 0;

	pthread_mutex_lock(&n->lock);
	for (i = 0; i < n->npeers && !ret; i++) {
		p = &n->peers[i];
		if (p->id < 0 || p->role != PSCHED_ROLE_SERVER)
			continue;
		c = ans ? p->ans : p->conn;
		while (c && !po_dial_done(p, c, ans)) {
			if (n->fatal) {
				ret = psd_set_errmsg(n->fatal, "%s",
						     n->fatal_msg);
				break;
			}
			if (atomic_load(&c->closed)) {
				ret = psd_set_errmsg(
					PSCHED_ERENDEZVOUS,
					"%s closed %s during the "
					"authentication handshake (does it "
					"have this job's PS_JOB_TOKEN? see "
					"its log)",
					p->desc, what);
				break;
			}
			if (psd_now_ms() >= deadline) {
				ret = psd_set_errmsg(
					PSCHED_ERENDEZVOUS,
					atomic_load(&c->authed)
						? "%s did not bind (PairReady) "
						  "%s within %u ms"
						: "%s did not answer our "
						  "hello's "
						  "authentication on %s within "
						  "%u ms",
					p->desc, what,
					n->cfg.connect_timeout_ms);
				break;
			}
			psd_deadline(&ts, 50);
			pthread_cond_timedwait(&n->cond, &n->lock, &ts);
		}
	}
	pthread_mutex_unlock(&n->lock);
	return ret;
}

static unsigned po_local_port(const struct psd_conn *c)
{
	struct sockaddr_in sin;
	socklen_t len = sizeof(sin);

	if (getsockname(c->fd, (struct sockaddr *)&sin, &len) ||
	    sin.sin_family != AF_INET)
		return 0;
	return ntohs(sin.sin_port);
}

/* Open, pair and greet the answers connection to @p. */
static int po_dial_answers(struct psched_node *n, struct psd_peer *p,
			   uint64_t deadline)
{
	struct psd_addr a;
	struct psd_conn *c;
	int ret;

	snprintf(a.host, sizeof(a.host), "%s", p->host);
	a.port = p->port;
	ret = psd_van_connect(n->van, &a,
			      (unsigned)(deadline - psd_now_ms() + 1), "server",
			      &c);
	if (ret)
		return psd_set_errmsg(ret,
				      "cannot open the answers connection "
				      "(PS_TCP_SPLIT=1) to %s: %s",
				      p->desc, psched_strerror(ret));
	pthread_mutex_lock(&n->lock);
	p->ans = c;
	pthread_mutex_unlock(&n->lock);
	psd_conn_pair(p->conn, c, false);
	psd_info("transport to %s: tcp split in two connections "
		 "(PS_TCP_SPLIT=1): requests from local port %u, answers to "
		 "local port %u",
		 p->desc, po_local_port(p->conn), po_local_port(c));
	return po_hello(n, p, c, PSD_CHAN_ANS);
}

int psd_po_connect_servers(struct psched_node *n, uint64_t deadline)
{
	struct psd_peer *p;
	unsigned i, chan;
	bool split = false;
	int ret;

	for (i = 0; i < n->npeers; i++) {
		p = &n->peers[i];
		if (p->id < 0 || p->role != PSCHED_ROLE_SERVER)
			continue;
		ret = psd_po_connect_server(
			n, p, (unsigned)(deadline - psd_now_ms() + 1));
		if (ret)
			return psd_set_errmsg(ret, "cannot connect to %s: %s",
					      p->desc, psched_strerror(ret));
		chan = n->cfg.tcp_split && p->conn->ops == &psd_tcp_ops
			       ? PSD_CHAN_REQ
			       : PSD_CHAN_BOTH;
		split |= chan == PSD_CHAN_REQ;
		ret = po_hello(n, p, p->conn, chan);
		if (ret)
			return ret;
	}
	ret = po_wait_servers(n, deadline, false);
	if (ret || !split)
		return ret;
	for (i = 0; i < n->npeers; i++) {
		p = &n->peers[i];
		if (p->id < 0 || p->role != PSCHED_ROLE_SERVER ||
		    p->conn->channel != PSD_CHAN_REQ)
			continue;
		ret = po_dial_answers(n, p, deadline);
		if (ret)
			return ret;
	}
	return po_wait_servers(n, deadline, true);
}
