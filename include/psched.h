/* SPDX-License-Identifier: MIT */
/*
 * psched: parameter-server communication with credit-based priority
 * scheduling.  This is the whole public API.
 *
 * Conventions: functions return 0 or a negative errno (or a psched code
 * from PSCHED_E_BASE down); psched_strerror() names any code, and
 * psched_errmsg() gives the calling thread's message for its last failed
 * call (naming the peer, key and step where there is one).  Nothing here
 * prints to stdout or aborts the process.
 */
#ifndef PSCHED_INCLUDE_PSCHED_H
#define PSCHED_INCLUDE_PSCHED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* libpsched is built with -fvisibility=hidden: what is declared here is
 * its whole exported interface. */
#pragma GCC visibility push(default)

/* psched's own error codes (negative, below every errno). */
#define PSCHED_E_BASE	   4096
#define PSCHED_ENODEDEAD   (-(PSCHED_E_BASE + 1)) /* a peer node died */
#define PSCHED_ESHUTDOWN   (-(PSCHED_E_BASE + 2)) /* cluster shutting down */
#define PSCHED_EUNKNOWNKEY (-(PSCHED_E_BASE + 3)) /* key never initialised */
#define PSCHED_ESIZE	   (-(PSCHED_E_BASE + 4)) /* length mismatch */
#define PSCHED_EREMOTE	   (-(PSCHED_E_BASE + 5)) /* peer rejected request */
#define PSCHED_ERENDEZVOUS (-(PSCHED_E_BASE + 6)) /* nodes never arrived */

enum psched_role {
	PSCHED_ROLE_SCHEDULER = 0,
	PSCHED_ROLE_SERVER = 1,
	PSCHED_ROLE_WORKER = 2,
};

/* Element type of a tensor: decides how the server sums pushes. */
enum psched_dtype {
	PSCHED_RAW = 0, /* bytes: no sum, the last push of a step wins */
	PSCHED_F32 = 1,
	PSCHED_F64 = 2,
	PSCHED_I32 = 3,
	PSCHED_I64 = 4,
	PSCHED_F16 = 5,	 /* IEEE half; servers add in float32 */
	PSCHED_BF16 = 6, /* bfloat16; servers add in float32 */
	PSCHED_DTYPE_MAX = PSCHED_BF16,
};

/* Barrier groups (bit mask). */
#define PSCHED_GROUP_SCHEDULER 1u
#define PSCHED_GROUP_SERVERS   2u
#define PSCHED_GROUP_WORKERS   4u
#define PSCHED_GROUP_ALL       7u

/*
 * Node configuration, opaque: every field is an option with a name (its
 * flag, e.g. "num-server", or one of its variables, "DMLC_NUM_SERVER";
 * docs/configuration.md lists them).  psched_cfg_create() sets the
 * defaults; then the environment (psched_cfg_from_env(), DMLC_* and PS_*
 * variables), command-line flags (psched_cfg_parse_args()) and
 * psched_cfg_set() override, whichever comes last winning.
 */
struct psched_cfg;

/* A configuration holding every option's default.  On 0 *@out is the
 * caller's, freed with psched_cfg_destroy(); -ENOMEM. */
int psched_cfg_create(struct psched_cfg **out);
/* Free @cfg; NULL is a no-op. */
void psched_cfg_destroy(struct psched_cfg *cfg);
/*
 * Set option @name (a flag name without "--", or one of its environment
 * variables) from @value, written as on the command line ("4M", "0.5",
 * "worker", "1").  -ENOENT for an unknown name, -EINVAL for a bad value
 * (psched_errmsg() names the option and says what it takes).
 */
int psched_cfg_set(struct psched_cfg *cfg, const char *name, const char *value);
/*
 * Write option @name's value into @buf (@size bytes, NUL-terminated) in
 * the form psched_cfg_set() takes: integers and byte counts in decimal,
 * seconds as a decimal number, booleans as 0 / 1, "" for an unset
 * optional value.  -ENOENT for an unknown name, -ERANGE when @size is too
 * small (then @buf holds what fits).
 */
int psched_cfg_get(const struct psched_cfg *cfg, const char *name, char *buf,
		   size_t size);
/* Override @cfg from DMLC_* / PS_* variables.  -EINVAL on a bad value
 * (psched_errmsg() names the variable). */
int psched_cfg_from_env(struct psched_cfg *cfg);
/*
 * Override @cfg from flags (--name=value or --name value) in @argv.
 * Recognised flags are removed from @argv (and *@argc updated) so a
 * program can parse its own after.  -EINVAL on a bad value or an unknown
 * --flag when @strict.  "--help" makes it return 1.
 */
int psched_cfg_parse_args(struct psched_cfg *cfg, int *argc, char **argv,
			  bool strict);
/*
 * Parse a byte count: decimal digits with an optional K, M or G suffix
 * (2^10, 2^20, 2^30; "KB"/"KiB" spellings too).  0 or -EINVAL (also on
 * overflow).
 */
int psched_parse_bytes(const char *s, uint64_t *out);
/* Print every option, its variable and its default to @out. */
void psched_cfg_usage(FILE *out);
/* The same for the options a program of @role reads (no --role: such a
 * program has its role). */
void psched_cfg_usage_role(FILE *out, enum psched_role role);
/* The library's release, "MAJOR.MINOR.PATCH" (the source tree's VERSION
 * file); the SONAME (libpsched.so.1) changes only with the ABI. */
const char *psched_version(void);
/* "scheduler", "server", "worker". */
const char *psched_role_name(enum psched_role role);

struct psched_node;

/*
 * Start a node: connect to the scheduler (or, for the scheduler, listen),
 * register, receive the node table, connect to the servers (workers) and
 * pass the start-up barrier.  Blocks until the whole cluster is up or the
 * connect timeout passes (then PSCHED_ERENDEZVOUS, and psched_errmsg()
 * names the roles and ranks that never arrived).  On 0 *@out is owned by
 * the caller and freed with psched_node_destroy().  @cfg is copied: the
 * caller may change or free it after the call.
 */
int psched_node_create(const struct psched_cfg *cfg, struct psched_node **out);
/*
 * Leave the cluster cleanly: a worker tells the scheduler it is done and
 * waits for the shutdown; a server or the scheduler stops serving.  Then
 * frees @node.  NULL is a no-op.  Returns 0 or the first error seen.
 */
int psched_node_destroy(struct psched_node *node);
/*
 * Serve until the cluster shuts down (servers and the scheduler).
 * Returns 0 on a clean shutdown or the error that ended the node.
 */
int psched_node_run(struct psched_node *node);

int psched_node_rank(const struct psched_node *node); /* rank within role */
/* Port the node listens on (scheduler, server); 0 for workers. */
unsigned psched_node_port(const struct psched_node *node);
int psched_node_id(const struct psched_node *node);
unsigned psched_num_workers(const struct psched_node *node);
unsigned psched_num_servers(const struct psched_node *node);
enum psched_role psched_node_role(const struct psched_node *node);

/*
 * Elastic membership (docs/elastic.md).  A worker leaves the job on
 * purpose (its data is exhausted, as Horovod's join): the scheduler
 * commits a membership without it from the step after the highest any
 * worker pushed, and from that step on the servers sum the other
 * workers' pushes only.  Call it once its own requests are done; blocks
 * until that membership is committed or @timeout_ms (0:
 * PS_REQUEST_TIMEOUT) passes.  Afterwards its pushes are refused
 * (-ESHUTDOWN) and psched_node_destroy() does not wait for the job's
 * end.  0, -EINVAL (not a worker), -EALREADY, -ETIMEDOUT, or the job's
 * error; psched_errmsg() says why.
 */
int psched_leave(struct psched_node *node, unsigned timeout_ms);
/*
 * Worker: the ranks of the workers whose pushes make up step @step, as
 * the configs this worker knows say (every step it pushed is covered):
 * the first @cap of them in @ranks, ascending.  Returns their number
 * (it may exceed @cap) or -EINVAL (not a worker).
 */
int psched_step_members(struct psched_node *node, uint64_t step,
			unsigned *ranks, unsigned cap);
/*
 * Worker: how many workers' pushes the last step this worker pushed of
 * dense key @key sums (what an average of its answer divides by); the
 * first step's members for a key it never pushed.  -EINVAL: not a
 * worker.
 */
int psched_key_members(struct psched_node *node, uint64_t key);

/* Wait until every node of @group (PSCHED_GROUP_*) reaches a barrier. */
int psched_barrier(struct psched_node *node, unsigned group,
		   unsigned timeout_ms);

/*
 * Completion callback of an asynchronous request; runs on the node's
 * receive thread: it must not block.  @err is 0 or the request's error,
 * and then psched_errmsg() in the callback says why.
 */
typedef void psched_done_fn(int err, uint64_t req, void *arg);

/*
 * Requests (workers only): one entry point, psched_request(), for every
 * push, pull and pushpull of the three families of keys.
 *
 * dense (PSCHED_FAMILY_DENSE): @nkeys distinct keys; key i has @lens[i]
 * bytes of elements of @dtype in its own buffer, @push_vals[i] (push) and
 * @pull_vals[i] (pull).  A key is declared by psched_keys_init() or its
 * first push; its length is fixed then, and a later mismatch fails with
 * PSCHED_ESIZE.  Each push of a key by a worker is one step; in sync mode
 * the servers sum the W workers' pushes of a step, then the sum becomes
 * the stored value.  A push for a later step than the one the servers
 * aggregate is held there (and completes at once) within limits
 * (docs/security.md "Limits and refusals").  A pull copies the stored
 * value into @pull_vals once it includes this worker's latest push of the
 * key.  A pushpull pushes, then pulls the new aggregate, in one round
 * trip; @push_vals and @pull_vals may be the same buffers.  With
 * @on_device the buffers are memory of CUDA device @device (docs/gpu.md):
 * the worker stages them through pinned host buffers; without CUDA in
 * this build, a driver or device @device, the request fails with -ENODEV,
 * and a host pointer or memory of another device gets -EINVAL.
 *
 * key list (PSCHED_FAMILY_KEYLIST; ps-lite's ZPush(keys, vals, lens)):
 * @nkeys small keys, sorted ascending with no duplicates (else -EINVAL
 * naming the first bad index), their values packed back to back in one
 * buffer, @push_buf (push) and @pull_buf (pull); key i holds @elems[i]
 * elements of @dtype (or, when @elems is NULL, @elem elements each; at
 * least 1).  Keys need no init: a server keeps a key from its first push
 * (value 0 before).  Server s of S owns the keys in [s * 2^64 / S,
 * (s + 1) * 2^64 / S), so a list is cut into one contiguous slice per
 * server, sent from the caller's arrays without copying.  Each key-list
 * push (or pushpull) of a worker is its next key-list step, whatever keys
 * it names (an empty list is a step that pushes nothing).  Once every
 * worker pushed step s, every key pushed in step s holds the sum of that
 * step's pushes; keys nobody pushed keep their value.  A pull returns
 * values that include this worker's latest key-list push.  A key's length
 * and the dtype of a server's key lists are fixed by their first push.
 * Each server checks its slice: one that disagrees (PSCHED_ESIZE naming
 * the key, -EINVAL for the dtype) or pulls a key never pushed
 * (PSCHED_EUNKNOWNKEY) is refused whole by that server, which stores
 * nothing of it and counts the push as an empty one of its step; other
 * servers' slices are not rolled back.  The request fails with the first
 * refusal.  Key lists use sync mode and the default update rule; they are
 * independent of dense keys.
 *
 * row-sparse (PSCHED_FAMILY_ROWS; embedding tables, docs/c-api.md
 * "Row-sparse tensors"): @nrows rows @row_ids of the table @key declared
 * by psched_row_sparse_init(), each of the table's width and dtype
 * (@dtype is not read), packed in @push_buf (push) and @pull_buf (pull;
 * row i for @row_ids[i]).  A push is one step (duplicate ids are summed;
 * an empty push, @nrows 0, is a step too); when every worker's push of a
 * step is in, each row pushed by any worker is replaced by the sum of
 * that step's pushes (async mode: the sum is added), or updated by the
 * optimizer (lazy update); rows nobody pushed are unchanged.  A pull
 * copies rows @row_ids (any order, repeats allowed) once the table
 * includes this worker's latest push; only servers owning those rows are
 * asked.  A pushpull pushes (@row_ids, @push_buf) and pulls the same ids
 * into @pull_buf once that push's step is applied, each server answering
 * with the rows it just updated.  A row id >= the table's rows fails with
 * -EINVAL before anything is sent; an unknown key with PSCHED_EUNKNOWNKEY.
 *
 * Every family: buffers (and the key, length and row id arrays) are the
 * caller's and are used in place: they must stay valid, and unchanged
 * for a push, until the request completes.  @priority: smaller = sooner.
 * On 0, *@req (may be NULL when @cb is set) identifies the request for
 * psched_wait() and psched_test(), and @cb (may be NULL) runs with @arg
 * when it completes.  Fields of another family than @family must be 0 /
 * NULL.  A malformed request fails at once with -EINVAL and
 * psched_errmsg() naming the field: an unknown @op or @family, a buffer
 * the op needs left NULL, a field of another family set, a negative
 * @device.
 */
enum psched_op {
	PSCHED_OP_PUSH = 1,
	PSCHED_OP_PULL = 2,
	PSCHED_OP_PUSHPULL = 3,
};

enum psched_family {
	PSCHED_FAMILY_DENSE = 0,   /* keys with a buffer each */
	PSCHED_FAMILY_KEYLIST = 1, /* many small keys in one buffer */
	PSCHED_FAMILY_ROWS = 2,	   /* rows of a row-sparse key */
	PSCHED_FAMILY_RAW = 3,	   /* psched_raw_request() only */
};

/*
 * A raw-family message as its receiver sees it: a request on a server
 * (psched_server_set_raw_handler()), or one server's answer to a pull on
 * the worker (psched_raw_answer_fn).  The arrays are valid during the
 * call only.
 */
struct psched_raw_msg {
	int cmd;      /* the request's cmd */
	uint64_t tag; /* the request's tag */
	bool push;    /* the request carries values */
	bool pull;    /* the request wants values back */
	int sender;   /* node id of the worker (requests) or server */
	int rank;     /* and its rank in its role */
	int priority; /* the request's */
	size_t nkeys;
	const uint64_t *keys;
	const uint32_t *lens; /* value bytes of each key; NULL: none sent */
	uint64_t nbytes;      /* value bytes at @vals */
	const void *vals;
	/* An answer to a pull for exactly the keys it asked, in its order:
	 * psched_raw_respond() leaves them out (the worker has them) and
	 * the answer callback sees the request's own @keys. */
	bool keys_asked;
	const void *hold_; /* psched_raw_keep()'s, not for the application */
};

/*
 * Keep the arrays of @m, a request in a raw handler or an answer in an
 * answer callback, past the call instead of copying them: call it during
 * that call.  Returns the block they lie in, to give back with
 * psched_raw_release() once done with them (any thread, any time), or
 * NULL when they cannot be kept (messages under 64 KiB, RDMA receives
 * the NIC wrote elsewhere): copy them then.  A kept block is the message's
 * receive buffer, handed over.
 */
void *psched_raw_keep(const struct psched_raw_msg *m);
/*
 * A block of at least @bytes bytes (uninitialised), or NULL without
 * memory.  Blocks given back are kept for the next ones (up to 16 of
 * them, 256 MiB in all, per process) with their pages mapped, so big
 * buffers of the same sizes every step are not faulted in and cleared
 * again.
 */
void *psched_raw_alloc(size_t bytes);
/* Give back a block of psched_raw_keep() or psched_raw_alloc(); NULL is
 * a no-op. */
void psched_raw_release(void *block);

/* Worker: one server's answer to a raw pull or pushpull, on the node's
 * receive thread, before the request completes; it must not block nor
 * call into psched. */
typedef void psched_raw_answer_fn(const struct psched_raw_msg *ans, void *arg);

struct psched_request {
	enum psched_op op;
	enum psched_family family;
	enum psched_dtype dtype; /* dense, key list */
	int priority;		 /* smaller = sooner */
	/* dense and key list: the keys */
	size_t nkeys;
	const uint64_t *keys;
	/* dense: bytes and buffer of each key */
	const uint64_t *lens;
	const void *const *push_vals;
	void *const *pull_vals;
	bool on_device; /* dense: buffers in CUDA device @device's memory */
	int device;
	/* key list: elements of each key, or @elem each when @elems is NULL */
	const uint32_t *elems;
	uint32_t elem;
	/* row-sparse: rows @row_ids of table @key */
	uint64_t key;
	size_t nrows;
	const uint64_t *row_ids;
	/* key list and row-sparse: the values, packed */
	const void *push_buf;
	void *pull_buf;
	psched_done_fn *cb; /* NULL: wait with psched_wait() */
	void *arg;
};

/* Issue request @rq (read during the call only; its arrays and buffers
 * stay in use until completion).  Unlocked: any application thread. */
int psched_request(struct psched_node *node, const struct psched_request *rq,
		   uint64_t *req);

/*
 * The raw family (PSCHED_FAMILY_RAW, issued by psched_raw_request();
 * ps-lite's KVWorker / KVServer, see docs/pslite.md).  A request's keys (sorted
 * ascending, so that each server's share is one run of them; an unsorted list
 * is cut as psched_raw_key_range() bounds fall) reach each server that owns
 * some of them as they are, with their values, counts, cmd and tag, and that
 * server's raw handler answers it when it wants: no sum, no steps, no
 * synchronisation across workers.  A push completes once every server
 * asked acknowledged it (psched_raw_respond()); a pull or pushpull once
 * every server asked answered, each answer handed to @answer first.  A
 * request whose keys no server owns completes at once.  Raw requests take
 * no credit (a handler may hold an answer as long as it likes) but keep
 * their priority and PS_REQUEST_TIMEOUT.
 */
/*
 * A raw request: @op of @nkeys keys @keys, @nbytes value bytes at @vals
 * (push, pushpull), the value bytes of each key in @lens (NULL: not sent;
 * a push without them cut by key range splits @vals evenly over its
 * keys), @cmd and @tag for the server's handler.  @server 0 cuts the keys
 * by key range, s + 1 sends the whole request to server rank s.  Pull
 * answers go to @answer (may be NULL) with @answer_arg; @cb, @arg,
 * @priority and the returned id as for psched_request().  Everything it
 * points to stays in use until completion.  @dtype is carried along, not
 * read.  Its own struct (not fields of struct psched_request): that one is
 * the caller's memory and part of libpsched.so.1's ABI.
 */
struct psched_raw_request {
	enum psched_op op;
	enum psched_dtype dtype;
	int priority;
	size_t nkeys;
	const uint64_t *keys;
	const uint32_t *lens;
	const void *vals;
	uint64_t nbytes;
	int cmd;
	uint64_t tag;
	unsigned server;
	psched_raw_answer_fn *answer;
	void *answer_arg;
	psched_done_fn *cb;
	void *arg;
};

/* Issue raw request @rq (read during the call only).  0, or -EINVAL
 * (psched_errmsg() names what is wrong), or the node's error. */
int psched_raw_request(struct psched_node *node,
		       const struct psched_raw_request *rq, uint64_t *req);

/* Server rank @rank's range of keys [*@begin, *@end) of @nserver: as
 * ps-lite cuts them, UINT64_MAX / @nserver keys each. */
void psched_raw_key_range(unsigned nserver, unsigned rank, uint64_t *begin,
			  uint64_t *end);

struct psched_raw_call;

/*
 * Server: the application's handler of raw requests, on the node's
 * receive thread.  It answers @call exactly once, now or later, from any
 * thread, with psched_raw_respond().  It must not block.
 */
typedef void psched_raw_handler_fn(struct psched_node *node,
				   struct psched_raw_call *call,
				   const struct psched_raw_msg *req, void *arg);
/* Install @fn on server @node (-EINVAL if it is not a server), or with
 * @node NULL for every server node of this process without its own; set
 * that before psched_node_create() so that no request arrives before it.
 * Without a handler raw requests are refused (-EOPNOTSUPP). */
int psched_server_set_raw_handler(struct psched_node *node,
				  psched_raw_handler_fn *fn, void *arg);
/*
 * Answer @call (which is freed: never use it again) with @ans: for a
 * push its keys and values are ignored; for a pull they go back to the
 * worker (@ans may be NULL: no keys), as do @ans->lens when set.  Any
 * thread.  0, or -errno when the answer could not be sent (the worker
 * is gone); @call is freed either way.
 */
int psched_raw_respond(struct psched_node *node, struct psched_raw_call *call,
		       const struct psched_raw_msg *ans);

/*
 * Application messages between any two nodes of a job (ps-lite's
 * SimpleApp, docs/pslite.md): small messages of a head and a body, sent
 * on the scheduler links (through the scheduler when neither end is it),
 * in order between two nodes.  Not the data path: a body is at most
 * PSCHED_APP_MAX_BODY bytes.
 */
#define PSCHED_APP_MAX_BODY (512u * 1024u)
struct psched_app_msg {
	int from; /* node id of the sender (psched_node_id()); set on send */
	int to;	  /* node id of the receiver: 0 the scheduler */
	bool request;
	int head;
	const void *body; /* valid during the handler only */
	size_t len;
	uint32_t app_id;
	uint32_t customer_id;
	int32_t timestamp;
};
/* The handler of application messages, on the node's receive thread (a
 * message a node sends itself: on the sending thread).  It must not
 * block. */
typedef void psched_app_handler_fn(struct psched_node *node,
				   const struct psched_app_msg *msg, void *arg);
/* Install @fn on @node, or with @node NULL for every node of this process
 * without its own (set that before psched_node_create()).  Messages that
 * find no handler are dropped (logged at debug level). */
int psched_set_app_handler(struct psched_node *node, psched_app_handler_fn *fn,
			   void *arg);
/* Send @msg (read during the call; its @from is ignored) to node
 * @msg->to.  Any thread, does not wait for delivery.  0, -EINVAL (no
 * such node, a body over the limit), or the error sending it. */
int psched_app_send(struct psched_node *node, const struct psched_app_msg *msg);

/* Dense host requests: psched_request() of family PSCHED_FAMILY_DENSE,
 * spelled as calls. */
int psched_push(struct psched_node *node, const uint64_t *keys, size_t nkeys,
		const void *const *vals, const uint64_t *lens,
		enum psched_dtype dtype, int priority, psched_done_fn *cb,
		void *arg, uint64_t *req);
int psched_pull(struct psched_node *node, const uint64_t *keys, size_t nkeys,
		void *const *vals, const uint64_t *lens,
		enum psched_dtype dtype, int priority, psched_done_fn *cb,
		void *arg, uint64_t *req);
int psched_pushpull(struct psched_node *node, const uint64_t *keys,
		    size_t nkeys, const void *const *push_vals,
		    void *const *pull_vals, const uint64_t *lens,
		    enum psched_dtype dtype, int priority, psched_done_fn *cb,
		    void *arg, uint64_t *req);

/*
 * Declare dense keys and their initial values (collective: every worker
 * calls it; worker rank 0's values win, the others only declare the
 * size).  Blocks until the servers hold the keys and every worker got
 * here, at most @timeout_ms (0 = the request timeout).  @vals may be NULL
 * on ranks other than 0.
 */
int psched_keys_init(struct psched_node *node, const uint64_t *keys,
		     size_t nkeys, const void *const *vals,
		     const uint64_t *lens, enum psched_dtype dtype,
		     unsigned timeout_ms);

/*
 * Declare row-sparse key @key, a table of @rows rows of @width elements
 * of @dtype, placed on the servers by row range; servers store only rows
 * ever pushed (the others read as zeros).  Collective like
 * psched_keys_init(): every worker passes the same shape; blocks.
 */
int psched_row_sparse_init(struct psched_node *node, uint64_t key,
			   uint64_t rows, uint64_t width,
			   enum psched_dtype dtype, unsigned timeout_ms);

/*
 * Wait for request @req to complete, at most @timeout_ms (0 = the node's
 * request timeout).  Returns the request's result; -ETIMEDOUT names the
 * peers still owing an answer.  A request may be waited on once; after a
 * timeout it is cancelled and its buffers are no longer written.
 */
int psched_wait(struct psched_node *node, uint64_t req, unsigned timeout_ms);

/*
 * 0 if device buffers of CUDA device @device can be used here; else
 * -ENODEV with psched_errmsg() saying why (built without CUDA, no driver,
 * no such device).  Probes once per process (one log line).
 */
int psched_cuda_check(int device);
/* 1 if this libpsched was built with CUDA, else 0. */
int psched_cuda_built(void);

/*
 * Has request @req completed?  1 yes (psched_wait() then returns at once
 * with its result), 0 not yet, -ENOENT if there is no such request to
 * wait for.  Never blocks.
 */
int psched_test(struct psched_node *node, uint64_t req);

/*
 * How many nodes of @group (PSCHED_GROUP_* mask) this node has seen die
 * (missed heartbeats past PS_HEARTBEAT_TIMEOUT, or a lost connection);
 * -EINVAL for a bad mask.
 */
int psched_num_dead_nodes(struct psched_node *node, unsigned group);

/* Message of the calling thread's last failed psched call ("" if none). */
const char *psched_errmsg(void);
/* Name of any code this library returns. */
const char *psched_strerror(int err);

/* Size in bytes of one element of @dtype (1 for PSCHED_RAW). */
unsigned psched_dtype_size(enum psched_dtype dtype);
/* "raw", "float32", "float64", "int32", "int64", "float16", "bfloat16";
 * "?" for a value outside the enum. */
const char *psched_dtype_name(enum psched_dtype dtype);

/* Request latency buckets of struct psched_stats (docs/metrics.md). */
#define PSCHED_LATENCY_BUCKETS	 20
#define PSCHED_LATENCY_BUCKET_US 16
/* Bytes moved so far by this node (payload only), for tools. */
struct psched_stats {
	uint64_t tx_bytes;
	uint64_t rx_bytes;
	uint64_t tx_msgs;
	uint64_t rx_msgs;
	uint64_t stored_bytes; /* server: bytes of tensor values it holds */
	uint64_t alloc_bytes;  /* server: bytes it allocated for them */
	/* worker: the scheduler's view */
	uint64_t chunks_started;      /* chunks sent so far */
	uint64_t max_in_flight_bytes; /* high-water mark of credit in use */
	uint64_t credit_bytes;	      /* credit in force, 0 = unlimited */
	uint32_t config_epoch;	      /* newest committed config epoch */
	/* worker: psched_wait()s whose answer this thread read itself
	 * (PS_CALLER_RX) */
	uint64_t caller_rx_waits;
	/* worker: requests registered and not done, and push bytes holding
	 * credit now */
	uint64_t requests_in_flight;
	uint64_t in_flight_bytes;
	/* worker: requests done, by outcome (docs/metrics.md) */
	uint64_t requests_ok;
	uint64_t errors_timeout;   /* -ETIMEDOUT */
	uint64_t errors_node_dead; /* PSCHED_ENODEDEAD */
	uint64_t errors_remote;	   /* PSCHED_EREMOTE: a server refused */
	uint64_t errors_shutdown;  /* PSCHED_ESHUTDOWN */
	uint64_t errors_other;
	/* worker: request latency, registration to completion; bucket i
	 * counts requests that took at most PSCHED_LATENCY_BUCKET_US << i
	 * microseconds (and more than the bucket below), the last one the
	 * rest */
	uint64_t latency_count[PSCHED_LATENCY_BUCKETS];
	uint64_t latency_sum_us;
};
void psched_node_stats(const struct psched_node *node,
		       struct psched_stats *out);

/*
 * Per-chunk timeline (workers).  psched_timeline_start() begins recording
 * (start, push done, pull done) of every chunk the worker sends, keeping at
 * most @max_events chunks (0: a default of 1M; older ones are kept, later
 * ones dropped and counted).  psched_timeline_write() writes what was
 * recorded as Chrome trace JSON (chrome://tracing, Perfetto) to @path.
 * Both return 0 or -errno; any thread.
 */
int psched_timeline_start(struct psched_node *node, size_t max_events);
int psched_timeline_write(struct psched_node *node, const char *path);

#pragma GCC visibility pop

#ifdef __cplusplus
}
#endif

#endif
