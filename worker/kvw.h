/* SPDX-License-Identifier: MIT */
/*
 * KV worker, private to worker/kvw_*.c and kv_worker.c (and the unit test):
 * push / pull / pushpull / init requests, with ByteScheduler's scheduling
 * built in (docs/architecture.md, "Key decisions": placement, config
 * epochs, the credit gate).
 *
 * A request is cut into chunks: per key, per server range (placement), and
 * within a range into pieces of the partition size of the config that the
 * key's step falls under (config epochs, cfgtab.h).  Chunks wait in one
 * priority queue (smaller priority = sooner, ties in arrival order; plain
 * arrival order in FIFO mode) and start only through the credit gate: a
 * chunk may start while the bytes in flight plus its own fit the credit, or
 * when nothing is in flight.  A push or pushpull chunk is in flight from its
 * start until the server acknowledges its bytes; pull chunks carry no
 * credit (they move no bytes out and cannot hold a push back).
 *
 * Why not until a pushpull's pull answer, as ByteScheduler counts it: that
 * answer waits for every other worker's push of the chunk, and two workers
 * whose senders started chunks in different orders (requests arrive at
 * slightly different times) then each hold their credit for chunks the
 * other cannot start: a deadlock, seen in test_sched.sh.  So the server
 * acks a pushpull chunk on receipt, and the answer follows when ready.
 *
 * Who sends: a request that fits in one small message and finds the queue
 * empty (and, if it carries a payload, no push in flight) is sent by the
 * caller at once (no thread hand-off, for latency); everything else is
 * sent by the worker's sender thread, so a push returns at once and
 * compute overlaps communication.  The van thread never sends
 * payloads: it only settles chunks and wakes the sender.
 *
 * Config switches are two-phase (proto/psched.proto, Config): between a
 * PREPARE and its COMMIT (or ABORT), pushes of steps beyond the highest
 * step this worker had pushed are parked, so no chunk is ever cut with a
 * config its servers and the other workers do not use for that step.
 *
 * Every wait is bounded and a dead server fails every request that still
 * needs it, naming the server, key and step.
 *
 * Four request families travel this one pipeline: dense tensors, key
 * lists, row-sparse tables and raw requests.  Each supplies a small table
 * (struct kvw_family): how to cut a request into chunks, its header and
 * payload, and how an answer is matched and lands.  Queueing, credit,
 * priorities, config epochs, timeouts, the timeline, answers and completion are
 * the pipeline's, written once.
 *
 * Files, one concern each:
 *   kvw_req.c     request table, settling, timeouts, cancel, psched_wait
 *   kvw_send.c    starting a request, sender thread, credit pump, sending
 *                 one chunk and completing its send
 *   kvw_rx.c      answers from servers (every family), server failure
 *   kvw_park.c    config PREPARE / COMMIT / ABORT, parking, the one place
 *                 the credit changes
 *   kvw_layout.c  the dense family: keys, building, cutting into chunks
 *   kvw_keylist.c the key-list family;  kvw_rows.c the row-sparse family;
 *                 kvw_raw.c the raw family (ps-lite's requests)
 *   kv_worker.c   public entry points, metrics, timeline, attach / destroy
 *
 * Locking.  One mutex, w->lock, guards all of struct psd_kvw and every
 * request, chunk and key reachable from it.  Every function below states
 * the lock it expects on entry and leaves on return:
 *   "Locked"   w->lock held on entry and on return, never dropped;
 *   "Unlocked" w->lock not held on entry or on return (it may take it);
 *   a name ending in _unlocks: w->lock held on entry and on return, but
 *              dropped and retaken inside (around a blocking send, a
 *              callback or a condition wait), so the caller must re-read
 *              anything it looked at before the call.
 * Callbacks of requests always run without w->lock.  w->lock is never
 * taken while holding n->lock or a connection's send lock.
 */
#ifndef PSCHED_WORKER_KVW_H
#define PSCHED_WORKER_KVW_H

#include <pthread.h>

#include "cfgtab.h"
#include "gpu/stage.h"
#include "chunkq.h"
#include "command.h"
#include "map.h"
#include "node.h"
#include "pollbudget.h"
#include "scratch.h"
#include "timeline.h"

#define KVW_IDX_BITS 24u
#define KVW_IDX_MASK ((1u << KVW_IDX_BITS) - 1u)
/* Requests up to this many payload bytes in one chunk go out inline. */
#define KVW_INLINE_MAX (256u * 1024u)

/* What this worker knows of one key; heap-allocated, in psd_kvw.keys. */
struct kvw_key {
	uint64_t total;
	uint8_t dtype;
	uint64_t step;	   /* pushes of this key so far */
	uint64_t last_req; /* duplicate-key check within a request */
	float *residual;   /* gradient compression: what was not sent yet */
	uint64_t rowbytes; /* row-sparse key: bytes per row (kvw_rows.c) */
};

struct kvw_srv {
	unsigned pending; /* chunks still owed by this server */
	unsigned busy;	  /* payload being received from it now */
};

struct kvw_slot {
	uint64_t key;
	uint64_t total;
	uint64_t step;
	uint8_t *dst;	    /* pull destination, NULL for push */
	const uint8_t *src; /* push source, NULL for pull */
	uint32_t epoch;	    /* config the step is cut with */
	uint64_t part;	    /* partition bytes of that config */
	uint8_t *codes;	    /* compressed push: one code per element */
};

enum kvw_chunk_state {
	KVW_CH_QUEUED = 0,
	KVW_CH_SENDING,
	KVW_CH_SENT,
	KVW_CH_DONE,
};

struct kvw_chunk {
	struct psd_chunk_node node; /* node.len: bytes the credit counts */
	struct kvw_req *req;
	uint64_t off; /* absolute tensor offset */
	uint64_t span;
	uint64_t part; /* chunk size of this range's layout (header) */
	uint32_t slot;
	uint16_t srank;
	uint8_t state;
	bool credited; /* its bytes count against the credit now */
	uint64_t t_start;
	uint64_t t_push; /* credit given back */
	bool rx_busy;	 /* its pull answer is being received into place */
	struct psd_stage_buf stg;    /* pinned slots of that answer (none:
					GPUDirect, or the scratch buffer) */
	struct psd_stage_buf tx_stg; /* pinned slots a staged push went out
				      * of: held until the chunk settles, as
				      * a transport may return from a
				      * request's send before the peer read
				      * it (shm, rdma; transport.h) */
	uint64_t coff; /* compressed push: payload at req->cbuf + coff */
	uint64_t clen;
	uint64_t kl_first; /* key list: first key index of the slice */
	uint64_t kl_n;	   /* and its key count (kvw_keylist.c) */
};

struct kvw_family;

struct kvw_req {
	const struct kvw_family *fam;
	uint64_t id;
	uint8_t type;
	uint8_t dtype;
	uint8_t flags;
	int priority;
	unsigned pending; /* chunks not yet settled (+1 per hold) */
	unsigned busy;	  /* receives in progress into caller memory */
	unsigned sending; /* chunks being sent by some thread now */
	bool done;
	bool inflight;	 /* counted in kvw_metrics.inflight */
	bool cancelled;	 /* late answers are discarded */
	bool parked;	 /* waiting for a config commit */
	bool on_gpu;	 /* values in memory of CUDA device gpu_dev */
	bool gpu_direct; /* ... moved by GPUDirect RDMA, not staged */
	int gpu_dev;
	uint64_t deadline_ms; /* callback requests: fail after this */
	uint64_t t_reg_us;    /* when it became in flight (latency) */
	int err;
	char msg[320];
	/* What a server said the request waits for (a RequestError of
	 * status 0), for its timeout message. */
	char notice[240];
	psched_done_fn *cb;
	void *cb_arg;
	struct psd_list park_link;
	struct kvw_srv *srv; /* [num_server], indexed by server rank */
	struct kvw_chunk *chunks;
	size_t nchunks;
	int cmp; /* compress kind of this push (common/compress.h) */
	float cmp_threshold;
	uint8_t *cbuf;		     /* compressed payloads of every chunk */
	struct psd_scratch *scratch; /* the worker's: cbuf and codes */
	/* A key list (kvw_keylist.c): the caller's arrays, one chunk per
	 * server slice; slots[0] holds the value buffers and the step. */
	uint32_t kl_len; /* elements per key, 0: kl_lens */
	uint32_t kl_tag; /* list tag (wire.h PSD_F_KLCACHED), 0: none */
	const uint64_t *kl_keys;
	const uint32_t *kl_lens;
	/* its keys packed per server (held; NULL: plain keys) */
	struct kvw_klset *kl_set;
	struct kvw_rows *rows; /* a row-sparse request (kvw_rows.c) */
	/* A raw request (kvw_raw.c): keys in kl_keys, values in slots[0].src,
	 * one chunk per server share (kl_first, kl_n). */
	const uint32_t *raw_lens;
	int raw_cmd;
	uint64_t raw_tag;
	psched_raw_answer_fn *raw_answer;
	void *raw_answer_arg;
	size_t nslots;
	struct kvw_slot slots[];
};

/* Progress reported to the scheduler's autotuner. */
struct kvw_metrics {
	uint64_t bytes_pushed;
	uint64_t bytes_pulled;
	uint64_t last_step; /* max_step when the last report went out */
	uint64_t last_us;   /* and when; 0: nothing pushed yet */
	/* runtime conditions (docs/tuner.md): link bandwidth = bytes over
	 * the time some request was in flight; compute = step time minus
	 * the time the application was blocked in psched_wait() */
	unsigned inflight;   /* registered requests not done */
	uint64_t busy_since; /* when inflight went 0 -> 1 */
	uint64_t busy_us;    /* closed busy periods, total */
	uint64_t wait_us;    /* blocked in psched_wait(), total */
	uint64_t last_bytes; /* at the last report: pushed + pulled */
	uint64_t last_busy;  /* busy_us + open period */
	uint64_t last_wait;  /* wait_us */
	uint64_t caller_rx;  /* waits answered on the waiting thread */
	/* Requests done: outcomes and latency (psched_stats). */
	uint64_t done_ok;
	uint64_t err_timeout;
	uint64_t err_node_dead;
	uint64_t err_remote;
	uint64_t err_shutdown;
	uint64_t err_other;
	uint64_t lat_count[PSCHED_LATENCY_BUCKETS];
	uint64_t lat_sum_us;
	/* Credit-bound or not (kvw_send.c, kvw_floor_look()): while sends
	 * wait for credit, how often the transport found the path with room
	 * (floor_n) out of lim_n looks, at most one per KVW_FLOOR_GAP_US
	 * (lim_us: the last). */
	unsigned lim_n;
	unsigned floor_n;
	uint64_t lim_us;
	/* The largest minimum round trip the transport gave for a server's
	 * path since the last report (0: none; tcp only), and the next
	 * server a report looks at (kvw_metrics_rtt()). */
	uint32_t rtt_us;
	unsigned rtt_next;
};

/* The one outstanding ServerCommand of this worker (worker/command.c).
 * Guarded by the node's lock and waited for on the node's cond, which a
 * cluster-wide failure also wakes. */
struct kvw_cmd {
	bool busy;
	uint64_t seq;
	unsigned acks;
	bool *acked; /* [num_server] */
	int status;
	char msg[320];
	psd_cmd_data_fn *on_data; /* NULL, or what a command's acks carry */
	void *data_arg;
};

struct psd_kvw {
	pthread_mutex_t lock;
	pthread_cond_t cond;	  /* request completion, receives drained */
	pthread_cond_t send_cond; /* sender thread: work may start */
	/* Bumped (under lock) whenever a request completes: psched_wait()
	 * polls it, unlocked, for up to spin's budget before sleeping on
	 * cond (kvw_req.c, kvw_wait_done()). */
	atomic_uint done_gen;
	struct psd_poll_budget spin; /* locked */
	/* A psched_wait() reading its answer itself (kvw_req.c,
	 * PS_CALLER_RX): its thread, and an eventfd it also polls, which a
	 * request settled on another thread (an error, a timeout, a dead
	 * server) writes, so that the wait sees it.  Locked; rx_efd -1 when
	 * it could not be made (then no wait reads its answer). */
	bool rx_waiting;
	pthread_t rx_waiter;
	int rx_efd;
	bool last_single;	 /* the last request done had one chunk */
	unsigned busy_peak;	 /* most requests in flight, this period */
	unsigned last_busy_peak; /* the same, the last period */
	/* The request table: an index array, not a hash map.  A request id
	 * is (generation << KVW_IDX_BITS) | index, so a stale id of a reused
	 * index is told apart without a lookup structure. */
	struct kvw_req **reqs; /* by index; id low bits */
	uint32_t *free_idx;
	size_t nfree;
	size_t cap;
	uint64_t gen;
	struct psd_map keys; /* key -> struct kvw_key */
	int cmp_kind;	     /* gradient compression of float32 pushes */
	float cmp_threshold;
	uint64_t max_step;	 /* highest step pushed of any key */
	uint64_t kl_step;	 /* key-list pushes so far (kvw_keylist.c) */
	struct kvw_klcache *klc; /* the last key list, sent once per server */

	bool fifo;
	struct psd_chunkq q;
	struct psd_credit credit;
	uint32_t credit_epoch; /* config whose credit is in force */
	struct psd_cfgtab cfgs;
	bool preparing; /* a PREPARE is open */
	uint32_t prep_epoch;
	uint64_t prep_step; /* pushes beyond this step park */
	struct psd_list parked;
	/* psched_leave(): asked, then out of the membership from step
	 * left_from on (no push of any step may start after that). */
	bool leaving;
	bool left;
	uint64_t left_from;

	pthread_t sender;
	bool sender_started;
	bool stop;
	struct psd_timeline tl;
	struct kvw_metrics met; /* autotuner reports, see kvw_metrics_note */
	struct kvw_cmd cmd;	/* under the node's lock, see above */
	struct kvw_gpu *gpu;	/* device staging, made on first use */
	/* big per-request buffers (row-sparse, compressed pushes) */
	struct psd_scratch scratch;
};

static inline struct psd_kvw *kvw_of(const struct psched_node *n)
{
	return n->role_state;
}

static inline bool kvw_is_push(uint8_t type)
{
	return psd_msg_is_push(type);
}

/*
 * A request family: what a dense request (kvw_layout.c), a key list
 * (kvw_keylist.c) and a row-sparse request (kvw_rows.c) each supply to
 * the one pipeline, as a transport supplies struct psd_transport_ops.
 * Every op runs with w->lock held, except ->fill (unlocked, while its
 * chunk is being sent) and ->free (any lock).  NULL only where said.
 */
struct kvw_family {
	const char *what; /* in messages: "", "key-list ", "row-sparse " */
	uint8_t flag;	  /* header flag its answers may carry (wire.h) */
	bool stepped;	  /* cut under the config of its step (epochs) */
	bool keyed;	  /* answers name their chunk's slot key */
	/* Cut @r into r->chunks, counted in r->srv[].pending; NULL: cut
	 * when it was built.  0, or -errno with psched_errmsg() set. */
	int (*layout)(struct psched_node *n, struct kvw_req *r);
	/* Whether the caller sends @r's queued chunks itself now; NULL:
	 * never (the sender thread sends them all). */
	bool (*send_inline)(const struct psched_node *n,
			    const struct psd_kvw *w, const struct kvw_req *r);
	/* The header of @ch and its payload (@iov has room for 3). */
	void (*hdr)(const struct psched_node *n, const struct kvw_chunk *ch,
		    struct psd_hdr *h, struct iovec *iov, int *niov);
	/* @ch's payload is written by ->fill as it is sent (NULL: never);
	 * iov[0] of ->hdr is then the buffer ->fill writes if the
	 * transport cannot place it (psd_conn_send_fill()). */
	bool (*filled)(const struct kvw_chunk *ch);
	psd_fill_fn fill;
	/* Bytes a pull answer to @ch carries (NULL: ch->span). */
	uint64_t (*rx_len)(const struct kvw_req *r, const struct kvw_chunk *ch);
	/* Where pull answer @h to @ch, arriving on @c, lands; NULL: it does
	 * not fit @ch and is read into the scratch buffer. */
	void *(*rx_dst)(struct kvw_req *r, const struct kvw_chunk *ch,
			const struct psd_hdr *h, const struct psd_conn *c);
	/* A pull answer @h to @ch of any length, read into the scratch
	 * buffer at @payload (NULL: answers must have ->rx_len bytes). */
	void (*rx_any)(struct kvw_req *r, const struct kvw_chunk *ch,
		       const struct psd_conn *c, const struct psd_hdr *h,
		       const void *payload);
	/* The answer of @ch is in at @payload (NULL: nothing more to do). */
	void (*rx_landed)(struct kvw_req *r, const struct kvw_chunk *ch,
			  const void *payload);
	/* Free what the family hung on @r (NULL: nothing). */
	void (*free)(struct kvw_req *r);
};

extern const struct kvw_family psd_kvw_dense;
extern const struct kvw_family psd_kvw_keylist;
extern const struct kvw_family psd_kvw_rowsparse;
extern const struct kvw_family psd_kvw_raw;

/* kvw_req.c: the request table.  All Locked. */
struct kvw_req *psd_kvw_req_find(struct psd_kvw *w, uint64_t id);
int psd_kvw_req_register(struct psd_kvw *w, struct kvw_req *r);
void psd_kvw_req_unregister(struct psd_kvw *w, struct kvw_req *r);
/* Any lock: @r is no longer reachable from @w. */
void psd_kvw_req_free(struct kvw_req *r);
/* Locked.  A request of family @fam with @nkeys slots, no chunks yet
 * (kvw_layout.c); NULL without memory. */
struct kvw_req *psd_kvw_req_alloc(struct psched_node *n,
				  const struct kvw_family *fam, uint8_t type,
				  size_t nkeys, enum psched_dtype dtype);

/* kvw_req.c: settling.  Locked.  First error wins. */
void psd_kvw_req_error(struct kvw_req *r, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Locked.  Release one hold of @r; true if it just completed and its
 * callback must run (psd_kvw_req_run_cb(), after unlocking). */
bool psd_kvw_req_settle(struct psd_kvw *w, struct kvw_req *r);
/* Locked: a request starts or stops counting as in flight (metrics). */
void psd_kvw_busy(struct psd_kvw *w, struct kvw_req *r, bool on);
/* Locked.  Wake the sender if the head of the queue may start. */
void psd_kvw_kick(struct psd_kvw *w);
/* Locked.  The server has @ch's bytes: its credit comes back. */
void psd_kvw_chunk_uncredit(struct psd_kvw *w, struct kvw_chunk *ch);
/* Locked.  @ch is answered, failed or cancelled: give back its credit (or
 * take it off the queue) and release its hold on the request.  Returns
 * psd_kvw_req_settle()'s answer. */
bool psd_kvw_chunk_settle(struct psd_kvw *w, struct kvw_chunk *ch, bool failed);
/* Unlocked.  Run the callback of completed @r, then unregister and free
 * it (takes w->lock briefly). */
void psd_kvw_req_run_cb(struct psd_kvw *w, struct kvw_req *r);
/* Locked.  @r failed its deadline; its message names what it waits for. */
void psd_kvw_req_timed_out(struct psched_node *n, struct kvw_req *r,
			   unsigned timeout_ms);
/* Locked on entry and return; waits on w->cond (dropping the lock) until
 * no send or receive touches @r's caller memory.  Give up on @r. */
void psd_kvw_req_cancel_unlocks(struct psched_node *n, struct kvw_req *r);
/* Locked on entry and return, dropped to run callbacks (sender thread).
 * Fail callback requests past their deadline. */
void psd_kvw_expire_unlocks(struct psched_node *n);
/* Unlocked; blocks.  Init request @req, issued when @ret is 0, is
 * answered and every worker got here: 0 or the first error. */
int psd_kvw_init_wait(struct psched_node *n, int ret, uint64_t req,
		      unsigned timeout_ms);

/*
 * Issuing requests: unlocked (any application thread); request.c maps
 * struct psched_request onto them.  @type is PSD_MSG_PUSH, _PULL,
 * _PUSHPULL (or _INIT: psched_keys_init(), psched_row_sparse_init()).
 * kv_worker.c: dense keys, @device -1 for host buffers.
 */
int psd_kvw_issue(struct psched_node *n, uint8_t type, const uint64_t *keys,
		  size_t nkeys, const void *const *push_vals,
		  void *const *pull_vals, const uint64_t *lens,
		  enum psched_dtype dtype, int device, int priority,
		  uint8_t flags, psched_done_fn *cb, void *arg, uint64_t *req);
/* kvw_keylist.c: a key list, key i of @lens[i] elements (@len each when
 * @lens is NULL). */
int psd_kvw_kl_issue(struct psched_node *n, uint8_t type, size_t nkeys,
		     const uint64_t *keys, const uint32_t *lens, uint32_t len,
		     const void *push_vals, void *pull_vals,
		     enum psched_dtype dtype, int priority, psched_done_fn *cb,
		     void *arg, uint64_t *req);
/* kvw_rows.c: rows @ids of row-sparse key @key. */
int psd_kvw_rows_issue(struct psched_node *n, uint8_t type, uint64_t key,
		       size_t nids, const uint64_t *ids, const void *src,
		       void *out, int priority, psched_done_fn *cb, void *arg,
		       uint64_t *req);

/* kvw_raw.c: raw request @rq (its op checked by request.c). */
int psd_kvw_raw_issue(struct psched_node *n, uint8_t type,
		      const struct psched_raw_request *rq, uint64_t *req);

/* kvw_layout.c, the dense family.  Locked. */
int psd_kvw_req_build(struct psched_node *n, uint8_t type, const uint64_t *keys,
		      size_t nkeys, const void *const *push_vals,
		      void *const *pull_vals, const uint64_t *lens,
		      enum psched_dtype dtype, struct kvw_req **out);
/* Locked.  A new key of @len bytes of @dtype, or NULL without memory. */
struct kvw_key *psd_kvw_key_add(struct psd_kvw *w, uint64_t key, uint64_t len,
				enum psched_dtype dtype);
/* Locked.  Slot @i of push @r is the next step of key @k. */
void psd_kvw_push_step(struct psd_kvw *w, struct kvw_req *r, size_t i,
		       struct kvw_key *k);

/* kvw_send.c: starting requests. */
/* Unlocked.  0 when @n is a worker that may issue a request answered by
 * @cb or by @req, else -EINVAL with psched_errmsg() set. */
int psd_kvw_issue_check(const struct psched_node *n, psched_done_fn *cb,
			const uint64_t *req);
/* Locked.  0, or the node's fatal error (psched_errmsg() set). */
int psd_kvw_fatal(const struct psched_node *n);
/* Locked on entry and return, dropped around an inline send.  Register
 * built request @r and start it (park it, or cut and queue its chunks and
 * maybe send them): 0, or the error with @r freed (psched_errmsg() set).
 * *@fire: @r completed and its callback must run (psd_kvw_req_run_cb(),
 * after unlocking). */
int psd_kvw_req_issue_unlocks(struct psched_node *n, struct kvw_req *r,
			      int priority, psched_done_fn *cb, void *arg,
			      uint64_t *req, bool *fire);
/* Locked.  Cut @r (under its step's config if its family is stepped) and
 * queue every chunk, or none: 0 or -errno (psched_errmsg() set). */
int psd_kvw_req_layout(struct psched_node *n, struct kvw_req *r);
/* Locked.  The header fields every family starts from (psd_hdr). */
void psd_kvw_hdr_base(const struct psched_node *n, const struct kvw_chunk *ch,
		      struct psd_hdr *h);

/* kvw_send.c: the sender. */
/* Unlocked.  Start / stop the sender thread. */
int psd_kvw_sender_start(struct psched_node *n);
void psd_kvw_sender_stop(struct psd_kvw *w);

/*
 * kvw_gpu.c: device (CUDA) requests, staged through pinned host memory
 * (common/gpu/stage.h), or with GPUDirect RDMA handed to the transport
 * as they are (psd_gpu_direct_choose(): PS_GPU_DIRECT, the transport,
 * the probe; decided once with the pool).  Only the sender thread sends
 * device chunks.
 */
/* Unlocked.  Check that @device is usable and every value is its memory;
 * make the staging pool on first use and decide GPUDirect.  0 or
 * -ENODEV / -EINVAL / -EOPNOTSUPP (PS_GPU_DIRECT=1 not possible). */
int psd_kvw_gpu_prepare(struct psched_node *n, int device, size_t nkeys,
			const void *const *push_vals, void *const *pull_vals);
/* The device bytes of one push chunk, read under w->lock. */
struct kvw_gpu_job {
	bool on;     /* a device push chunk to stage */
	bool direct; /* a device push chunk for ->send_dev() (GPUDirect) */
	int dev;
	uint64_t tag; /* request id and chunk index */
	const void *src;
	size_t len;
};
/* Locked.  @ch's job (job->on false for a host chunk or no payload). */
void psd_kvw_gpu_job(const struct kvw_chunk *ch, struct kvw_gpu_job *job);
/* Unlocked (sender thread).  Stage @job's bytes, complete, into @b and
 * start the copy of @next (if on) ahead, to overlap the send of @b.
 * 0 or the error (psd_set_errmsg). */
int psd_kvw_gpu_stage_push(struct psd_kvw *w, const struct kvw_gpu_job *job,
			   const struct kvw_gpu_job *next,
			   struct psd_stage_buf *b);
void psd_kvw_gpu_unstage(struct psd_kvw *w, struct psd_stage_buf *b);
/* Unlocked (sender thread).  psd_conn_send_dev() said -EOPNOTSUPP for a
 * GPUDirect chunk (@why): it will be staged.  Logs once. */
void psd_kvw_gpu_direct_refused(struct psd_kvw *w, const char *why);
/* Unlocked (van thread).  Pinned slots for a device pull answer of @len
 * bytes, or NULL (then the connection's scratch buffer is used). */
void *psd_kvw_gpu_rx_buf(struct psd_kvw *w, size_t len,
			 struct psd_stage_buf *b);
/* Unlocked (van thread).  Copy an answer to device memory. */
int psd_kvw_gpu_to_device(struct psd_kvw *w, int device, void *dst,
			  const void *src, size_t len);
/* Unlocked; the worker is going away. */
void psd_kvw_gpu_fini(struct psd_kvw *w);
/* Unit test only: stage "device" @device of @n with copier @ops (its
 * device memory is whatever @ops copies from), skipping the CUDA checks;
 * before any device request.  And the pool's counters. */
int psd_kvw_gpu_use_copier(struct psched_node *n, int device,
			   const struct psd_copy_ops *ops, void *ctx);
void psd_kvw_gpu_stats(struct psd_kvw *w, struct psd_stage_stats *out);
/* Unit test only, after psd_kvw_gpu_use_copier(): decide GPUDirect as
 * psd_kvw_gpu_prepare() does, with mode n->cfg.gpu_direct, transport
 * @transport and a probe answering @probe_on.  The choice or -EOPNOTSUPP.
 */
int psd_kvw_gpu_fake_direct(struct psched_node *n, const char *transport,
			    bool probe_on);
/* Locked.  Device requests of @w go by GPUDirect. */
bool psd_kvw_gpu_direct(const struct psd_kvw *w);

/* kvw_keylist.c.  Unlocked: free the key-list cache (worker teardown). */
void psd_kvw_kl_fini(struct psd_kvw *w);

/* kvw_park.c.  Unlocked (van thread): the app's config hook. */
void psd_kvw_config(struct psched_node *n, const Psched__Config *m);
/* Any thread.  0, or -ESHUTDOWN (psched_errmsg() set) for a push of a
 * worker that left the job (psched_leave()). */
int psd_kvw_leave_check(struct psched_node *n, uint8_t type);
/* Locked.  The config of each slot's step; a push of a step under a
 * newer config puts that config's credit in force. */
void psd_kvw_req_config(struct psd_kvw *w, struct kvw_req *r);

/* kvw_rx.c.  Unlocked (van thread): the app's receive hooks. */
int psd_kvw_rx_header(struct psched_node *n, struct psd_conn *c,
		      const struct psd_hdr *h, void **dst);
void psd_kvw_rx_data(struct psched_node *n, struct psd_conn *c,
		     const struct psd_hdr *h, void *payload);
void psd_kvw_peer_failed(struct psched_node *n, struct psd_peer *p, int err,
			 const char *why);
/* RequestError (a server's reason for refusing), else command acks. */
bool psd_kvw_rx_control(struct psched_node *n, struct psd_conn *c,
			const Psched__Control *m);

/*
 * kvw_detached.c, for the unit test only.  A worker node of @cfg (role
 * forced to worker) whose node table holds @num_server servers (ids
 * 1..num_server, descs "server <id> (rank <r>, detached)") and no
 * connections, with the KV layer attached and its sender running, but no
 * van, postoffice or scheduler.  The caller connects each server peer
 * (peer->conn, conn->peer_id) and feeds n->role's hooks from its own van.
 * Unlocked.  0 or -errno.
 */
int psd_kvw_node_create_detached(const struct psched_cfg *cfg,
				 unsigned num_server, struct psched_node **out);
/* Stop the KV layer and free @n (not the connections); NULL is a no-op. */
void psd_kvw_node_destroy_detached(struct psched_node *n);

#endif
