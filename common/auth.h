/* SPDX-License-Identifier: MIT */
/*
 * Job authentication (docs/security.md "The job secret").  Every connection a
 * node accepts or opens starts unauthenticated; the van holds it to the
 * pre-authentication limits (PS_AUTH_TIMEOUT, PS_PREAUTH_MAX_FRAME,
 * PS_MAX_PENDING_AUTH) until its owner calls psd_conn_set_authed().
 *
 * The handshake, the same for registration with the scheduler and for a
 * worker's hello on a data connection (I = the side that connected, R =
 * the side that accepted, K = the job's secret, n_I and n_R fresh 32-byte
 * random nonces):
 *   I -> R  Register or Hello carrying n_I
 *   R -> I  Challenge { n_R, HMAC(K, "psched-auth-1" R kind id n_I n_R) }
 *   I       checks R's proof: R knows K (and answered this n_I)
 *   I -> R  Proof { HMAC(K, "psched-auth-1" I kind id n_I n_R) }
 *   R       checks I's proof: I knows K (and answered this n_R)
 * K never travels, nor a hash of it alone; each proof covers a nonce the
 * checking side just drew, so a recorded handshake replays to nothing,
 * and the role byte keeps R's answers from serving as I's.  Without a
 * secret (PS_ALLOW_UNAUTHENTICATED=1) K is empty: the same messages,
 * proving nothing.  No encryption: this keeps strangers out of the job;
 * it does not hide tensors from, or stop, someone on the path.
 */
#ifndef PSCHED_COMMON_AUTH_H
#define PSCHED_COMMON_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "psched.h"
#include "psched.pb-c.h"

#define PSD_AUTH_NONCE_LEN  32u
#define PSD_AUTH_PROOF_LEN  32u
#define PSD_AUTH_SECRET_MAX 1024u

struct psd_auth_secret {
	uint8_t key[PSD_AUTH_SECRET_MAX];
	size_t len;
	bool none; /* PS_ALLOW_UNAUTHENTICATED and no secret */
};

enum psd_auth_kind {
	PSD_AUTH_REGISTER = 1, /* node -> scheduler; id = the node's role */
	PSD_AUTH_HELLO = 2,    /* worker -> server; id = the worker's id */
	/* The two connections of a split pair (PS_TCP_SPLIT, Hello.channel
	 * 1 and 2): a kind each, so that a proof made for one channel does
	 * not open another. */
	PSD_AUTH_HELLO_REQ = 3,
	PSD_AUTH_HELLO_ANS = 4,
};

/* The handshake kind of a hello opening @channel (PSD_CHAN_*). */
static inline enum psd_auth_kind psd_auth_hello_kind(unsigned channel)
{
	return channel == 1   ? PSD_AUTH_HELLO_REQ
	       : channel == 2 ? PSD_AUTH_HELLO_ANS
			      : PSD_AUTH_HELLO;
}

/*
 * The job's secret from @cfg: job_token (PS_JOB_TOKEN, --job-token) or
 * the file job_token_file names (PS_JOB_TOKEN_FILE; one trailing newline
 * dropped; refused when writable by others, empty, or over 1 KiB).
 * Neither: -EACCES with psched_errmsg() saying how to set one, unless
 * allow_unauthenticated, which warns and sets s->none.  Logs a warning
 * for a secret under 16 bytes (open to guessing from a recorded
 * handshake) and for a file others may read.
 */
int psd_auth_secret_load(const struct psched_cfg *cfg,
			 struct psd_auth_secret *s);

/* Fresh random nonce (getrandom); 0 or -errno. */
int psd_auth_nonce(uint8_t out[PSD_AUTH_NONCE_LEN]);

/* The proof of the responder (@responder) or of the initiator. */
void psd_auth_proof(const struct psd_auth_secret *s, bool responder,
		    enum psd_auth_kind kind, int32_t id, const uint8_t *n_i,
		    const uint8_t *n_r, uint8_t out[PSD_AUTH_PROOF_LEN]);

/* @proof (@len bytes from the peer) is the expected one. */
bool psd_auth_check(const struct psd_auth_secret *s, bool responder,
		    enum psd_auth_kind kind, int32_t id, const uint8_t *n_i,
		    const uint8_t *n_r, const uint8_t *proof, size_t len);

/*
 * The handshake on a connection (van thread; see the top of this file).
 * c->nonce_mine, c->nonce_peer, c->auth_id and c->auth_step hold its
 * state.  Each returns 0, or a negative code with the reason logged and
 * psched_errmsg() set; the caller then closes @c.
 */
struct psd_conn;
/* Initiator: draw c->nonce_mine for the first message (Register/Hello). */
int psd_auth_start(struct psd_conn *c, int32_t id);
/* Responder: the first message carried @nonce (@len bytes) claiming @id:
 * draw our nonce and send the Challenge with our proof. */
int psd_auth_challenge(const struct psd_auth_secret *s, struct psd_conn *c,
		       int sender, enum psd_auth_kind kind, int32_t id,
		       const uint8_t *nonce, size_t len);
/* Initiator: check the responder's Challenge in @m, answer with our
 * Proof, and mark @c authenticated.  @who names the peer in errors. */
int psd_auth_answer(const struct psd_auth_secret *s, struct psd_conn *c,
		    int sender, enum psd_auth_kind kind,
		    const Psched__Control *m, const char *who);
/* Responder: check the initiator's Proof in @m; on 0 @c is
 * authenticated. */
int psd_auth_finish(const struct psd_auth_secret *s, struct psd_conn *c,
		    enum psd_auth_kind kind, const Psched__Control *m);

#endif
