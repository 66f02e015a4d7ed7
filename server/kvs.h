/* SPDX-License-Identifier: MIT */
/*
 * KV server, private to server/: stores its byte range of every key,
 * aggregates pushes (dist_sync: the W pushes of a step are summed chunk by
 * chunk, then the sum replaces the stored value or the updater folds it
 * in; async: each push is applied at once) and answers pulls, queueing
 * early ones until their version exists.
 *
 *   kvs_rx.c       the request pipeline: every request's header checks
 *                  and its family (struct psd_kvs_family); the dense
 *                  family's push/pull/init
 *   kvs_store.c    dense entries: create, find, free, memory accounting
 *   kvs_step.c     the open step: layout, sum, updater, version bump
 *   kvs_reply.c    answers, refusals and the wait queues of every family
 *                  (pulls by priority, held early pushes)
 *   kvs_keylist.c  the key-list family (kvs_kl.h: kvs_klstore.c and
 *                  kvs_klapply.c its store)
 *   kvs_rows.c     the row-sparse family (kvs_rowtab.c its tables)
 *   kvs_raw.c      the raw family: requests handed to the application
 *   kv_server.c    role glue: attach, destroy, stats, config, command
 *   kvs_states.c   optimizer state dump/load commands
 *
 * All state is touched only by the van thread, so there are no locks;
 * only the byte counters are read from other threads (stats).  Payloads
 * land in place where that is safe (the merge buffer, with one worker)
 * and otherwise in the connection's reusable scratch buffer.
 */
#ifndef PSCHED_SERVER_KVS_H
#define PSCHED_SERVER_KVS_H

#include <stdatomic.h>

#include "cfgtab.h"
#include "map.h"
#include "node.h"
#include "updater.h"

/* A request waiting for a version, a chunk, or its step (held push). */
struct psd_kvs_wait {
	struct psd_list link;
	struct psd_conn *conn; /* holds a reference */
	struct psd_hdr h;      /* the request */
	uint64_t want;	       /* version that answers it */
	void *buf;	       /* held payload or the pull's ids, owned */
	uint64_t held;	       /* bytes of buf counted in parked_bytes */
	uint64_t since_ms;     /* queued then (psd_now_ms()) */
};

struct psd_kvs_entry {
	uint64_t key;
	uint64_t total;
	uint8_t dtype;
	uint64_t off; /* this server's range */
	uint64_t len;
	uint8_t *value;
	uint8_t *merge;
	uint64_t version; /* steps applied */
	/* the open step (version + 1) */
	bool open;
	uint64_t chunk; /* chunk size of its layout (common/partition.h) */
	uint64_t nchunks;
	uint64_t chunks_done;
	bool upd; /* the updater runs per completed chunk; value has it */
	/* Pushes that complete a chunk: the members of the step's config;
	 * KVS_WANT_PENDING while that config's commit is on its way. */
	uint32_t want;
	uint32_t want_epoch; /* the config epoch the open step's pushes carry */
	uint32_t *counts;    /* pushes per chunk */
	struct psd_list *cwait; /* per chunk: pushpulls waiting for it */
	uint64_t counts_cap;
	uint64_t *wbytes;      /* bytes per worker rank */
	struct psd_list pulls; /* struct psd_kvs_wait, want > version */
	struct psd_list held;  /* pushes for later steps, arrival order */
	int creator;	       /* node id of the worker that created it */
	bool *inited;	       /* [nworker]: init of this key answered */
	/* Two workers used different lengths (or dtypes): every request
	 * on the key is refused with this reason from then on. */
	char *conflict;
	bool pair_mapped; /* value + merge: one huge-page mapping */
	uint64_t filled;  /* bytes written by payloads so far, <= len */
	uint64_t open_ms; /* when the open step opened */
	/* The step whose waiting requests were told which workers it lacks
	 * (psd_kvs_tick()). */
	uint64_t told_step;
	uint64_t snap_step; /* the snapshot it was last copied for */
	bool restored;	    /* its value came from a snapshot */
	bool states_due;    /* ... and its optimizer states are still to come */
};

struct kvs_rows;
struct psd_kvs_rows;
struct psd_kvs_snap;
struct psd_kvs_conn;

/*
 * A request family: dense tensors (kvs_rx.c), key lists (kvs_keylist.c)
 * or row-sparse tables (kvs_rows.c), picked by the header's flags.  The
 * pipeline (psd_kvs_rx_header(), psd_kvs_rx_data()) checks that a
 * request comes from a worker and fits PS_MAX_TENSOR_BYTES and resets
 * the connection's state; the family decodes the rest of the header,
 * folds the payload into its store and answers.  Van thread.
 */
struct psd_kvs_family {
	uint8_t flag;	  /* header flag that picks it; 0: dense */
	const char *noun; /* in refusals: "key", "row-sparse key" */
	const char *obj;  /* what h->total measures: "tensor", "table" */
	/* Header checked by the pipeline: 0, the payload goes to *@dst
	 * (NULL: the scratch buffer) and ->data runs; PSD_RX_DISCARD:
	 * refused and answered; -errno drops the connection. */
	int (*header)(struct psched_node *n, struct psd_conn *c,
		      struct psd_kvs_conn *kc, const struct psd_hdr *h,
		      void **dst);
	/* The payload of a request ->header accepted is in. */
	void (*data)(struct psched_node *n, struct psd_conn *c,
		     struct psd_kvs_conn *kc, const struct psd_hdr *h,
		     void *payload);
	/* Drop the waits of @c (all when NULL), answering @err unless 0. */
	void (*drop)(struct psched_node *n, struct psd_conn *c, int err,
		     const char *why);
	/* Free the family's state (the node goes). */
	void (*fini)(struct psched_node *n);
};

extern const struct psd_kvs_family psd_kvs_dense, psd_kvs_keylist,
	psd_kvs_rowsparse, psd_kvs_raw;

/* What the header hook decided for the message now being received. */
struct psd_kvs_conn {
	const struct psd_kvs_family *fam; /* accepted at its header */
	struct psd_kvs_entry *e;
	struct kvs_rows *rows; /* a row-sparse request (kvs_rows.c) */
	int wrank;
	bool direct;	   /* payload went straight into e->merge */
	void *hold;	   /* payload buffer of an early push, owned */
	uint64_t hold_len; /* its bytes, counted in parked_bytes */
	void *kl_own;	   /* a key list's payload buffer, when the store
			    * may adopt it (kvs_klstore.c psd_kl_rxbuf()) */
};

struct psd_kvs {
	struct psd_map entries; /* key -> struct psd_kvs_entry */
	bool async;
	bool hugepages;		/* PS_SERVER_HUGEPAGES: kvs_pair_alloc() */
	bool kl_hugepages;	/* PS_KEYLIST_HUGEPAGES (kvs_klstore.c) */
	struct psd_updater upd; /* common/updater.c; none = default rule */
	/* The application's controller (kvstore.h); under n->lock. */
	psched_server_controller_fn *ctl;
	void *ctl_arg;
	/* The application's raw handler (kvs_raw.c); under n->lock. */
	psched_raw_handler_fn *raw_fn;
	void *raw_arg;
	unsigned nworker;
	int broken; /* a worker died: sync steps cannot complete */
	char broken_msg[200];
	struct psd_cfgtab cfgs; /* config epochs, to check chunk layouts */
	/* Early pushes: at most max_ahead steps beyond a key's open step,
	 * and at most max_parked bytes of them held (0: the default, see
	 * psd_kvs_parked_limit()). */
	uint64_t max_ahead;
	uint64_t max_parked;
	uint64_t parked_bytes; /* held payloads, van thread only */
	/* Bytes of dense keys declared but never written by a payload (an
	 * init without a value): not counted in the default parked limit,
	 * which only bytes that arrived raise.  Van thread. */
	uint64_t unfilled_bytes;
	/* Refusals' log lines (kvs_reply.c): the time the token bucket
	 * stands at, and how many were not logged since the last one. */
	uint64_t rl_ms;
	uint64_t rl_quiet;
	/* Optimizer states in transfer (kvs_states.c): a dump's snapshot,
	 * or the records of a load arriving piece by piece. */
	float *cmp_buf; /* async: a compressed push dequantised */
	uint64_t cmp_cap;
	int xfer_op; /* Psched__OptStates__Op, 0: none */
	uint8_t *xfer;
	size_t xfer_len;
	char xfer_name[16];
	/* Read by psched_node_stats() from any thread. */
	atomic_uint_fast64_t stored_bytes; /* tensor bytes held */
	atomic_uint_fast64_t alloc_bytes;  /* bytes allocated for them */
	bool gpu_sum; /* PS_SERVER_GPU_SUM: float sums on CUDA device 0 */
	struct psd_kvs_kl *kl;	   /* key lists (kvs_keylist.c), made on use */
	struct psd_kvs_rows *rows; /* row-sparse keys, made on first use */
	struct psd_kvs_snap *snap; /* snapshots (kvs_snap.c), NULL: none */
};

static inline struct psd_kvs *psd_kvs_of(const struct psched_node *n)
{
	return n->role_state;
}

/* kvs_store.c */
struct psd_kvs_entry *psd_kvs_entry_find(struct psd_kvs *s, uint64_t key);
/* A key this server has not seen: allocate its range (zero value). */
int psd_kvs_entry_create(struct psched_node *n, const struct psd_hdr *h,
			 struct psd_kvs_entry **out);
/* Free @e and its buffers (its wait lists must be empty). */
void psd_kvs_entry_free(struct psd_kvs *s, struct psd_kvs_entry *e);
/* @bytes more of @e were written by a payload (counted up to its len,
 * psd_kvs_parked_limit()). */
void psd_kvs_entry_filled(struct psd_kvs *s, struct psd_kvs_entry *e,
			  uint64_t bytes);
/* Some key has steps applied, open or held: the sync/async mode is in
 * use. */
bool psd_kvs_has_steps(const struct psd_kvs *s);

/* @buf (*@cap bytes, malloc'd) or a larger one with room for @len (never NULL
 * but out of memory, @buf then unchanged). */
void *psd_kvs_room(void *buf, uint64_t *cap, uint64_t len);
/* Free a held early-push payload of @len bytes and uncount it. */
void psd_kvs_hold_free(struct psd_kvs *s, void *buf, uint64_t len);
/* Bytes of early pushes this server may hold now. */
uint64_t psd_kvs_parked_limit(const struct psd_kvs *s);
/*
 * May a push of a step after the open step @open (@what names it in the
 * refusal: "push of key 5") be held until its step opens?  0, or it is
 * refused here (a worker died; more than PS_MAX_STEPS_AHEAD ahead; no
 * room under PS_MAX_PARKED_BYTES) and the refusal's status is returned.
 */
int psd_kvs_admit_early(struct psched_node *n, struct psd_conn *c,
			const struct psd_hdr *h, uint64_t open,
			const char *what);
/* kvs_rx.c */
/*
 * Header of a push of a step after the open step @open: if
 * psd_kvs_admit_early() admits it, its payload goes into a hold buffer
 * of @kc (counted in parked_bytes) at *@dst and 0 is returned, else
 * PSD_RX_DISCARD.
 */
int psd_kvs_hold_early(struct psched_node *n, struct psd_conn *c,
		       struct psd_kvs_conn *kc, const struct psd_hdr *h,
		       uint64_t open, const char *what, void **dst);
/*
 * May push @h open the next step of @e with the layout it declares?
 * 0: yes (or the step is open already, checked by psd_kvs_step_open());
 * -EPROTO: its chunk is not the one its step's config cuts; 1: its
 * config's commit has not come here yet and the layout would take more
 * bookkeeping than KVS_TRUST_CHUNKS trusts on its word: it is held
 * until the commit comes (psd_kvs_step_config()).
 */
int psd_kvs_layout_check(const struct psd_kvs *s, const struct psd_kvs_entry *e,
			 const struct psd_hdr *h);

/* kvs_rx.c: may worker @wrank push step h->step (a known config's
 * members leave it out: it left the job)?  Refused and answered here
 * (-EPROTO) when not.  @by_step: check the members of the config this
 * server has for the step, whatever epoch the header names (key lists
 * carry a list tag there). */
int psd_kvs_check_member(struct psched_node *n, struct psd_conn *c,
			 const struct psd_hdr *h, int wrank, bool by_step);
/* How many workers' pushes make up @step of a key list or a row-sparse
 * key (the members of the config that covers it, as this server knows
 * it; a commit still on its way can only lower it). */
unsigned psd_kvs_step_nmembers(const struct psd_kvs *s, uint64_t step);

/* kvs_step.c */
#define KVS_WANT_PENDING UINT32_MAX
/* Open step version + 1 with the layout of partition @part (or check that
 * the open one has it): 0, -EPROTO, -ENOMEM. */
int psd_kvs_step_open(struct psd_kvs *s, struct psd_kvs_entry *e,
		      uint64_t part);
/* A config was committed: open steps that waited for it learn how many
 * pushes complete them, and may complete. */
void psd_kvs_step_config(struct psched_node *n);
/* Index of the chunk @h carries in the open step's layout, or -EPROTO. */
int psd_kvs_chunk_index(const struct psd_kvs_entry *e, const struct psd_hdr *h,
			uint64_t *idx);
/* dst += src for @len bytes of @dtype (RAW: the last push wins). */
void psd_kvs_sum(uint8_t dtype, void *dst, const void *src, uint64_t len);
/* psd_kvs_sum(), on the GPU when s->gpu_sum and @dtype is float32 or
 * float16 (falls back to the CPU if the GPU fails, logged). */
void psd_kvs_sum_on(struct psd_kvs *s, uint8_t dtype, void *dst,
		    const void *src, uint64_t len);
/* A sync push of the open step arrived (payload in @payload, or already in
 * the merge buffer when @direct): sum, ack or answer, maybe finish the
 * step.  @acked: the worker had its ack already (a held push). */
void psd_kvs_push_apply(struct psched_node *n, struct psd_conn *c,
			struct psd_kvs_entry *e, const struct psd_hdr *h,
			const void *payload, int wrank, bool direct,
			bool acked);

/*
 * Van thread, once a second: a step of a dense key that requests have
 * waited for more than half of PS_REQUEST_TIMEOUT is named to them with
 * the workers whose pushes it lacks (a RequestError of status 0, which
 * the worker keeps for its timeout message).
 */
void psd_kvs_tick(struct psched_node *n);

/* kvs_reply.c */
/* The header answering @req: @type from this node, with @status, @flags
 * and @length payload bytes. */
struct psd_hdr psd_kvs_answer_hdr(const struct psched_node *n,
				  const struct psd_hdr *req, uint8_t type,
				  int status, uint8_t flags, uint64_t length);
/* The push's bytes are here: give the worker its credit back. */
void psd_kvs_send_ack(struct psched_node *n, struct psd_conn *c,
		      const struct psd_hdr *req);
/* Answer one request with a status and no payload. */
void psd_kvs_reply_status(struct psched_node *n, struct psd_conn *c,
			  const struct psd_hdr *req, int status);
/* Answer a pull with the stored value, as the current version. */
void psd_kvs_reply_pull(struct psched_node *n, struct psd_conn *c,
			const struct psd_kvs_entry *e,
			const struct psd_hdr *req);
/* Answer a pushpull whose chunk of the open step is complete. */
void psd_kvs_reply_chunk(struct psched_node *n, struct psd_conn *c,
			 const struct psd_kvs_entry *e,
			 const struct psd_hdr *req);
/* Log why @h is refused, send the worker that reason (RequestError) and
 * answer it with @err; returns @err. */
int psd_kvs_reject(struct psched_node *n, struct psd_conn *c,
		   const struct psd_hdr *h, int err, const char *why);
int psd_kvs_rejectf(struct psched_node *n, struct psd_conn *c,
		    const struct psd_hdr *h, int err, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));
/* Send a RequestError about request @req to @c (no status answer);
 * @fatal: the worker cannot go on (see proto/psched.proto). */
void psd_kvs_send_error(struct psched_node *n, struct psd_conn *c,
			const struct psd_hdr *req, int err, const char *why,
			bool fatal);
/* Queue @h on @list until version @want (or its chunk) exists; @buf, if
 * not NULL, is a payload the wait owns on 0, @held of its bytes counted
 * in parked_bytes. */
int psd_kvs_queue_wait(struct psd_conn *c, struct psd_list *list,
		       const struct psd_hdr *h, uint64_t want, void *buf,
		       uint64_t held);
/* Free @w (off its list) and its buffer. */
void psd_kvs_wait_free(struct psd_kvs *s, struct psd_kvs_wait *w);
/* Off @list: the pull of the smallest priority (ties: the first to come)
 * that version @version answers, or NULL. */
struct psd_kvs_wait *psd_kvs_wait_pull(struct psd_list *list, uint64_t version);
/* Off @list: the first wait for step @step (a held push), or NULL. */
struct psd_kvs_wait *psd_kvs_wait_step(struct psd_list *list, uint64_t step);
/* Drop every wait of @c on @list (all when @c is NULL), answering @err
 * first unless it is 0 -- but held pushes, answered when held (a held
 * pushpull still owes its pull answer). */
void psd_kvs_drop_waits(struct psched_node *n, struct psd_list *list,
			struct psd_conn *c, int err, const char *why);
/* May pull @h of a key at @version be answered now (1: its step is
 * applied, or async)?  0: it waits (psd_kvs_queue_pull(), keeping @cost
 * bytes besides its wait).  Refused here, the error returned: a worker
 * died, so it would wait for ever; its step is more than
 * PS_MAX_STEPS_AHEAD beyond the next; no room under the parked limit,
 * which waiting pulls share with early pushes. */
int psd_kvs_pull_ready(struct psched_node *n, struct psd_conn *c,
		       const struct psd_hdr *h, uint64_t version,
		       uint64_t cost);
/* Queue pull @h on @list until version h->step, @buf (@len bytes, or
 * NULL) owned by the wait on 0; counted in parked_bytes with the wait. */
int psd_kvs_queue_pull(struct psched_node *n, struct psd_conn *c,
		       struct psd_list *list, const struct psd_hdr *h,
		       void *buf, uint64_t len);
/* Answer, in priority order, every queued pull the version now covers. */
void psd_kvs_answer_pulls(struct psched_node *n, struct psd_kvs_entry *e);
/* Chunk @idx of the open step is complete: answer its pushpulls. */
void psd_kvs_answer_chunk(struct psched_node *n, struct psd_kvs_entry *e,
			  uint64_t idx);
/* Drop every wait of @e from @c (all when @c is NULL), answering @err
 * first unless it is 0: pulls, pushpulls waiting for a chunk and early
 * pushes held for a later step. */
void psd_kvs_drop_entry_waits(struct psched_node *n, struct psd_kvs_entry *e,
			      struct psd_conn *c, int err, const char *why);

/* kvs_rx.c: the data hooks of struct psd_role_ops, and the families. */
int psd_kvs_rx_header(struct psched_node *n, struct psd_conn *c,
		      const struct psd_hdr *h, void **dst);
void psd_kvs_rx_data(struct psched_node *n, struct psd_conn *c,
		     const struct psd_hdr *h, void *payload);
/* Every family's ->drop, or (@fini) ->fini. */
void psd_kvs_families_drop(struct psched_node *n, struct psd_conn *c, int err,
			   const char *why);
void psd_kvs_families_fini(struct psched_node *n);

/* A config was committed: key-list and row-sparse steps that now have
 * every member's push complete (kvs_keylist.c, kvs_rows.c). */
void psd_kvs_kl_config(struct psched_node *n);
void psd_kvs_rows_config(struct psched_node *n);
/* kvs_klstore.c: free the key-list store (tests, ->fini). */
void psd_kvs_kl_free(struct psd_kvs *s);
/* kvs_rows.c: is @key a row-sparse key here? */
bool psd_kvs_rows_has(const struct psd_kvs *s, uint64_t key);

/* kv_server.c.  Van thread: apply a worker's ServerCommand, already
 * checked by server/command.c: @mode 0 unchanged, 1 sync, 2 async; @opt
 * NULL = unchanged.  0, or an error with psched_errmsg() saying why (sent
 * back to the worker). */
int psd_kvs_command(struct psched_node *n, int mode,
		    const struct psched_optimizer *opt);

/* kvs_states.c.  Van thread: a ServerCommand's OptStates; a dump's
 * piece goes into @ack (pointing into the snapshot, valid until the next
 * command).  0, or an error with psched_errmsg() set. */
int psd_kvs_states_command(struct psched_node *n, const Psched__OptStates *st,
			   Psched__CommandAck *ack);
/* Free a transfer in progress. */
void psd_kvs_states_drop(struct psd_kvs *s);

/* kvs_snap.c (docs/snapshots.md).  At attach: PS_SNAPSHOT_DIR,
 * PS_SNAPSHOT_STEPS and PS_RESTORE read (the snapshot to restore read
 * and checked whole); 0 or an error naming what is wrong. */
int psd_kvs_snap_init(struct psched_node *n);
void psd_kvs_snap_fini(struct psd_kvs *s);
/* Sync step e->version of @e was just applied: copied if a snapshot
 * takes it. */
void psd_kvs_snap_dense(struct psched_node *n, struct psd_kvs_entry *e);
/* @e was just created: its range and states from the snapshot being
 * restored, if it holds the key.  0, or an error (the snapshot's key has
 * another size or dtype) with psched_errmsg() set. */
int psd_kvs_restore_entry(struct psched_node *n, struct psd_kvs_entry *e);
/* An optimizer was installed: the restored keys' states from the
 * snapshot. */
void psd_kvs_restore_states(struct psched_node *n);
/* A worker's psched_snapshot(): everything this server holds, copied
 * now as step @step and written.  0, or -EBUSY (a step is open; a
 * periodic snapshot is being taken), -EINVAL (no PS_SNAPSHOT_DIR), with
 * psched_errmsg() set. */
int psd_kvs_snap_now(struct psched_node *n, uint64_t step);
/* Row-sparse key @e was just created: its rows (and their states) from
 * the snapshot being restored.  0, or an error (another table shape)
 * with psched_errmsg() set, nothing stored. */
int psd_kvs_restore_rows(struct psched_node *n, struct kvs_rows *e);

#endif
