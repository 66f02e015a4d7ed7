/* SPDX-License-Identifier: MIT */
/*
 * struct psched_node and the postoffice: node table, ids and ranks,
 * rendezvous, barriers, heartbeats, failure notices.  The role modules
 * (KV worker, KV server, scheduler) plug in through struct psd_role_ops, a
 * table of hooks that common/ calls without knowing which role is behind
 * it; app/roles.c is the one place that maps a role to its attach
 * function.
 */
#ifndef PSCHED_COMMON_NODE_H
#define PSCHED_COMMON_NODE_H

#include <pthread.h>

#include "auth.h"
#include "van.h"

/* Hellos a server keeps while its node table is still on the way. */
#define PSD_EARLY_HELLO_MAX 64

struct psd_peer {
	int id;
	enum psched_role role;
	int rank;
	char host[256];
	unsigned port;
	unsigned shm_port; /* auto: the server's shm listener, 0 none */
	char host_key[PSD_SHM_HOST_KEY_LEN]; /* psd_shm_host_key() of the peer,
						"" unknown */
	struct psd_conn *conn; /* worker -> server data connection */
	/* Worker, PS_TCP_SPLIT: the pair's answers connection (conn is then
	 * its request connection), and the server's PairReady on each. */
	struct psd_conn *ans;
	bool ready_req, ready_ans;
	bool dead;
	bool departed; /* worker said goodbye (finalized) */
	bool left;     /* ... after psched_leave(): it owes no step */
	char desc[96]; /* "server 1 (rank 0, 127.0.0.1:4000)" */
};

/*
 * A role (KV worker, KV server, scheduler) as common/ sees it: a table of
 * hooks, one static table per role module, chosen in app/roles.c.
 * psd_node_create() sets n->role, then calls attach, which sets
 * n->role_state; detach frees it.  Every hook but attach may be NULL.
 * attach/start/run/stop/detach run on the thread of psched_node_create(),
 * psched_node_run() and psched_node_destroy(); stats on any thread; the
 * rest on the van thread.
 *
 * A message arrives in two calls, rx_header then rx_data, so that the role
 * picks where the payload lands (a pull answer goes straight into the
 * caller's buffer) before the transport reads it.
 */
struct psd_role_ops {
	/* Allocate the role's state into n->role_state. */
	int (*attach)(struct psched_node *n);
	/* Join the cluster (NULL: psd_po_start(), register with the
	 * scheduler); returns once the cluster is up. */
	int (*start)(struct psched_node *n);
	/* Serve until shutdown (NULL: wait for the scheduler's shutdown or
	 * a cluster-wide error). */
	int (*run)(struct psched_node *n);
	/* Leave (NULL: psd_po_stop()).  After a failed start too. */
	void (*stop)(struct psched_node *n);
	/* A control message on a data connection that the postoffice does
	 * not handle itself; false: not the role's either (dropped). */
	bool (*rx_control)(struct psched_node *n, struct psd_conn *c,
			   const Psched__Control *m);
	int (*rx_header)(struct psched_node *n, struct psd_conn *c,
			 const struct psd_hdr *h, void **dst);
	void (*rx_data)(struct psched_node *n, struct psd_conn *c,
			const struct psd_hdr *h, void *payload);
	/* A peer died (heartbeat or closed connection); @why for logs. */
	void (*peer_failed)(struct psched_node *n, struct psd_peer *p, int err,
			    const char *why);
	void (*conn_closed)(struct psched_node *n, struct psd_conn *c);
	/* A config switch from the scheduler (PREPARE, COMMIT, ABORT). */
	void (*on_config)(struct psched_node *n, const Psched__Config *cfg);
	/* Van thread, after a round that received one small message: may
	 * the loop busy-poll for the next (PS_POLL_US)?  NULL: yes. */
	bool (*may_poll)(struct psched_node *n);
	/* Van thread, about once a second (NULL: never). */
	void (*tick)(struct psched_node *n);
	/* Fill the role's fields of psched_node_stats() (any thread). */
	void (*stats)(const struct psched_node *n, struct psched_stats *out);
	/* Free n->role_state (after stop; also after a failed attach). */
	void (*detach)(struct psched_node *n);
	/* Any thread: send application message @m (body APP) to node @to,
	 * not this one.  NULL: on the scheduler link (common/app.c). */
	int (*app_send)(struct psched_node *n, int to,
			const Psched__Control *m);
};

struct psched_node {
	struct psched_cfg cfg;
	const struct psd_transport_ops *ops;
	struct psd_van *van;
	char host[256];
	unsigned listen_port;
	/* PS_TRANSPORT=auto: where shm reaches (psd_shm_host_key(), "" when
	 * not auto or unknown) and a server's shm listener (0: none). */
	char host_key[PSD_SHM_HOST_KEY_LEN];
	unsigned shm_port;
	int id;
	int rank;
	unsigned num_server;
	unsigned num_worker;
	struct psd_conn *sched; /* connection to the scheduler */

	pthread_mutex_t lock; /* guards everything below */
	pthread_cond_t cond;
	bool have_table;
	struct psd_peer *peers; /* indexed by id, npeers entries */
	unsigned npeers;
	/* Worker: it left the job (psched_leave()) from this step on, 0 not;
	 * its goodbye says so.  Under lock. */
	uint64_t left_from;
	int fatal; /* cluster-wide error, sticks */
	char fatal_msg[384];
	/* Application messages (common/app.c); under lock. */
	psched_app_handler_fn *app_fn;
	void *app_arg;
	uint64_t barrier_seq;  /* last barrier this node entered */
	uint64_t barrier_done; /* last barrier released */
	bool shutdown;
	bool finalizing; /* worker said it is done, waits for shutdown */
	bool sched_lost; /* scheduler closed us before authenticating */
	/* Heartbeats come from their own thread, not the van loop: a node
	 * busy summing or sending large tensors is alive. */
	pthread_t hb_thread;
	bool hb_started;
	bool hb_stop;
	pthread_cond_t hb_cond;
	struct psd_auth_secret secret; /* the job's (auth.h) */
	/* Authenticated hellos that came before our own node table (van
	 * thread only). */
	struct psd_early_hello {
		struct psd_conn *conn; /* holds a reference */
		int id;
	} early[PSD_EARLY_HELLO_MAX];
	unsigned nearly;

	const struct psd_role_ops *role;
	void *role_state; /* struct psd_kvw / psd_kvs / psd_sched */
};

/* Id of server rank r / worker rank r. */
static inline int psd_server_id(unsigned r)
{
	return 1 + (int)r;
}

static inline int psd_worker_id(const struct psched_node *n, unsigned r)
{
	return 1 + (int)n->num_server + (int)r;
}

/* Peer by id, NULL if unknown.  Caller holds n->lock or the table is
 * fixed (after start-up). */
struct psd_peer *psd_node_peer(struct psched_node *n, int id);
/* Record a cluster-wide error (first one wins) and wake every waiter. */
void psd_node_set_fatal(struct psched_node *n, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Send a control message to the scheduler. */
int psd_node_send_sched(struct psched_node *n, const Psched__Control *msg);
/* app.c.  Van thread (or the sender, to itself): hand application
 * message @m, from node @from, to @n's handler. */
void psd_app_deliver(struct psched_node *n, int from,
		     const Psched__AppMessage *m);

/* Node-side (server, worker) start and stop. */
int psd_po_start(struct psched_node *n);
/* Connect to the scheduler, register and authenticate (po_join.c), by
 * @deadline (ms, psd_now_ms()). */
int psd_po_join(struct psched_node *n, uint64_t deadline);
void psd_po_stop(struct psched_node *n);
/* PS_TRANSPORT=auto (po_shm.c): our shm host key and, on a server, an
 * shm listener beside the main one (after psd_van_listen(), before
 * psd_van_start()); a failure only logs (peers then use n->ops). */
void psd_po_shm_setup(struct psched_node *n);
/* Open p->conn to server @p: by shm when both advertised the same shm
 * host key, else (or when that fails) over n->ops; the choice is logged
 * (info).  0 or -errno as psd_van_connect(). */
int psd_po_connect_server(struct psched_node *n, struct psd_peer *p,
			  unsigned timeout_ms);
/* po_dial.c: dial every server (a split pair each over TCP with
 * PS_TCP_SPLIT=1) and wait until each is authenticated and bound.
 * Worker, its start thread. */
int psd_po_connect_servers(struct psched_node *n, uint64_t deadline);
/* po_dial.c: the van thread's part: a server's PairReady. */
void psd_po_on_pair_ready(struct psched_node *n, struct psd_conn *c,
			  const Psched__PairReady *pr);
/* The postoffice's van callbacks for @n, as psd_po_start() gives them to
 * its van (also for tests/fuzz/fuzz_node.c, which feeds them frames). */
void psd_po_van_cb(struct psched_node *n, struct psd_van_cb *cb);
int psd_po_finalize(struct psched_node *n);

/*
 * Create a node of @cfg's role played by @role: pick the data transport,
 * attach the role, then its start hook.  On 0 *@out is the caller's; on
 * error everything is undone and psched_errmsg() says why.
 */
int psd_node_create(const struct psched_cfg *cfg,
		    const struct psd_role_ops *role, struct psched_node **out);

#endif
