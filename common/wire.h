/* SPDX-License-Identifier: MIT */
/*
 * The data-plane header: fixed size, little-endian, validated on receipt
 * before any field is trusted.  Every message is this header followed by
 * `length` payload bytes (tensor bytes, or a packed protobuf-c control
 * message when type is PSD_MSG_CONTROL).
 *
 *  off size field
 *    0   4  magic "PSD1"
 *    4   1  version (1)
 *    5   1  type (enum psd_msg_type)
 *    6   1  dtype (enum psched_dtype)
 *    7   1  flags (PSD_F_*)
 *    8   4  sender node id (i32)
 *   12   4  status: 0, or a negative error code in responses (i32)
 *   16   8  key
 *   24   8  total: bytes of the whole tensor
 *   32   8  offset: first tensor byte this message concerns
 *   40   8  span: tensor bytes this message concerns
 *   48   8  length: payload bytes that follow the header
 *   56   8  part: partition bytes of this step's layout (0 = whole range)
 *   64   8  step: the key's push count on the sender (version for pulls)
 *   72   8  req: request id (echoed in responses)
 *   80   4  slot: index of the key within the request (echoed)
 *   84   4  epoch: config epoch the sender used
 *   88   4  priority (i32, smaller = sooner)
 *   92   4  reserved, must be 0
 */
#ifndef PSCHED_COMMON_WIRE_H
#define PSCHED_COMMON_WIRE_H

#include <stdint.h>
#include <sys/uio.h>

#define PSD_HDR_SIZE	96u
#define PSD_HDR_MAGIC	0x31445350u /* "PSD1" little-endian */
#define PSD_HDR_VERSION 1u
/* Control payloads are small; anything larger is a bad peer. */
#define PSD_MAX_CONTROL (1u << 20)

enum psd_msg_type {
	PSD_MSG_CONTROL = 1,
	PSD_MSG_PUSH = 2,      /* payload: span bytes; answered by PUSH_ACK */
	PSD_MSG_PULL = 3,      /* no payload; answered by PULL_RESP */
	PSD_MSG_PUSHPULL = 4,  /* payload; answered by PULL_RESP */
	PSD_MSG_PUSH_ACK = 5,  /* no payload */
	PSD_MSG_PULL_RESP = 6, /* payload: span bytes (none on error) */
	PSD_MSG_INIT = 7,      /* payload: span bytes or none; PUSH_ACK */
	PSD_MSG_TYPE_MAX = 7,
};

/* flags */
#define PSD_F_HAS_VALUE 0x01u /* INIT: payload carries the initial value */
/* PUSH, PUSHPULL of float32: the payload is compressed (common/
 * compress.h), length psd_cmp_len() of span / 4 elements. */
#define PSD_F_COMPRESSED 0x02u
/*
 * PUSH, PULL, PUSHPULL and their answers (PUSH_ACK, PULL_RESP): a key list
 * (PSCHED_FAMILY_KEYLIST requests, worker/kvw_keylist.c, server/kvs_keylist.c),
 * the slice of one request that this server owns.  The fields mean: key first
 * key of the slice (0 if empty; for logs) part    n: keys in the slice (may be
 * 0) offset  elements per key when every key has the same length, else 0 and a
 * u32 element count per key follows the keys total, span   value bytes of the
 * slice (equal; 0 when n is 0) step    the worker's key-list step (pushes: the
 * step pushed; pulls: the step whose value is wanted) epoch   0 (key lists are
 * not partitioned) Request payload: n u64 keys (sorted, distinct), then the n
 * u32 lengths if offset is 0, then (PUSH, PUSHPULL) span value bytes. PULL_RESP
 * carries span value bytes in the order of the request's keys; PUSH_ACK
 * nothing.  psd_hdr_decode() checks that length, span and n agree.
 */
#define PSD_F_KEYLIST 0x04u
/*
 * With PSD_F_KEYLIST on a request: epoch is a list tag (0: none).  A
 * request with a tag and without PSD_F_KLCACHED carries its keys and the
 * server keeps a copy under (sender, tag), replacing the sender's last
 * one; a request with PSD_F_KLCACHED carries no keys and no lengths (the
 * payload is only the values of a push, nothing for a pull) and names
 * the slice the sender sent before with that tag: a worker pushing the
 * same list every step sends its keys once.
 */
#define PSD_F_KLCACHED 0x10u
/*
 * With PSD_F_KEYLIST on a PUSH, PULL or PUSHPULL that carries its keys
 * (not PSD_F_KLCACHED; part >= 1): the keys are packed (common/klpack.h)
 * instead of n u64 words.  The payload is the packed section, then the n
 * u32 lengths if offset is 0, then (PUSH, PUSHPULL) the span value bytes;
 * the section's length P is what remains of length, a multiple of 8 and
 * at least psd_klpack_min_len(n).  The receiver checks the rest when it
 * unpacks (widths, P exact, gaps, keys strictly ascending) and refuses
 * the request whole, storing nothing, if any rule is broken.
 */
#define PSD_F_KLPACKED 0x20u
/*
 * PUSH, PULL, INIT, PULL_RESP of a row-sparse key (common/rows.h): a
 * table of total / part rows of part bytes (the row width times the
 * element size); offset and span are the byte range of the rows the
 * receiving server holds (row range times part).  Payloads:
 *   PUSH:      u32 nrows, u32 pieces, nrows x u64 row ids (strictly
 *              increasing, within the server's rows), nrows rows of part
 *              bytes; pieces = how many row pushes this worker sends this
 *              server for this step (the step is complete on the server
 *              when every worker's pieces are in).  Length 8 + nrows *
 *              (8 + part); nrows may be 0 (an empty push still counts).
 *   PULL:      u32 nrows, u32 0, nrows x u64 row ids (as for PUSH).
 *   PULL_RESP: the nrows rows asked for, in the order asked (length
 *              nrows * part; none on error).
 *   INIT:      no payload: declares the table (rows start at zero).
 * Never with PSD_F_COMPRESSED or PSD_F_HAS_VALUE; PUSH_ACK carries none.
 */
#define PSD_F_ROWS	0x08u
#define PSD_ROWS_PREFIX 8u
/*
 * PUSH, PULL, PUSHPULL and their answers of the raw family
 * (PSCHED_FAMILY_RAW: keys and values handed to the server's handler as
 * they are, worker/kvw_raw.c, server/kvs_raw.c).  The fields mean:
 *   key     first key (0 if none; for logs)
 *   part    n: keys in the message (may be 0)
 *   offset  bit 0 (PSD_RAW_LENS): a u32 value-byte count per key follows
 *           the keys; bit 1 (PSD_RAW_ASKED, PULL_RESP only): the n keys are
 *           the request's, in its order, and are not sent
 *   total, span  value bytes (equal)
 *   epoch   the request's cmd (an int32, echoed in the answer)
 *   step    the request's tag (echoed)
 * Payload: n u64 keys unless PSD_RAW_ASKED, then the n u32 counts with
 * PSD_RAW_LENS, then span value bytes.  A PULL carries no values (span 0).
 * PUSH_ACK carries nothing; PULL_RESP has the same layout as a request (none on
 * error). Never with another flag.
 */
#define PSD_F_RAW     0x40u
#define PSD_RAW_LENS  1u
#define PSD_RAW_ASKED 2u
#define PSD_F_ALL     (0x17u | PSD_F_ROWS | PSD_F_KLPACKED | PSD_F_RAW)

struct psd_hdr {
	uint8_t type;
	uint8_t dtype;
	uint8_t flags;
	int32_t sender;
	int32_t status;
	uint64_t key;
	uint64_t total;
	uint64_t offset;
	uint64_t span;
	uint64_t length;
	uint64_t part;
	uint64_t step;
	uint64_t req;
	uint32_t slot;
	uint32_t epoch;
	int32_t priority;
};

/* Write @h into @buf (PSD_HDR_SIZE bytes). */
void psd_hdr_encode(const struct psd_hdr *h, uint8_t *buf);
/*
 * Parse and validate @buf against the framing rules: magic, version, known
 * type/dtype/flags, zero reserved bytes, payload length consistent with the
 * type, offset+span within total without overflow, element alignment,
 * total at most @max_tensor except in requests (push, pull, pushpull,
 * init), which psd_van_rx_header() refuses one by one.  Returns 0 or -EPROTO
 * with a reason in
 * *@why (static string).
 */
int psd_hdr_decode(const uint8_t *buf, uint64_t max_tensor, struct psd_hdr *h,
		   const char **why);
const char *psd_msg_type_name(unsigned type);
/* True for messages a worker sends to a server. */
static inline int psd_msg_is_request(unsigned type)
{
	return type == PSD_MSG_PUSH || type == PSD_MSG_PULL ||
	       type == PSD_MSG_PUSHPULL || type == PSD_MSG_INIT;
}

/* True for requests that carry values to sum (push, pushpull). */
static inline int psd_msg_is_push(unsigned type)
{
	return type == PSD_MSG_PUSH || type == PSD_MSG_PUSHPULL;
}

/* True for requests answered with values (pull, pushpull). */
static inline int psd_msg_is_pull(unsigned type)
{
	return type == PSD_MSG_PULL || type == PSD_MSG_PUSHPULL;
}

/* Append the @len bytes at @p to message parts @iov (*@k of them so far)
 * unless @len is 0. */
static inline void psd_iov_add(struct iovec *iov, int *k, const void *p,
			       uint64_t len)
{
	if (!len)
		return;
	iov[*k].iov_base = (void *)(uintptr_t)p;
	iov[(*k)++].iov_len = (size_t)len;
}

/* The bytes of message parts @iov[0..@k). */
static inline uint64_t psd_iov_len(const struct iovec *iov, int k)
{
	uint64_t len = 0;

	for (int i = 0; i < k; i++)
		len += iov[i].iov_len;
	return len;
}

#endif
