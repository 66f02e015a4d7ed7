// SPDX-License-Identifier: MIT
/* Job secret loading and the handshake's proofs (auth.h). */
#include <fcntl.h>
#include <pthread.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "auth.h"
#include "internal.h"
#include "digest.h"
#include "van.h"

#define AUTH_HOWTO                                                             \
	"set PS_JOB_TOKEN to the same random value on every node of the "      \
	"job (e.g. export PS_JOB_TOKEN=$(head -c 24 /dev/urandom | "           \
	"base64)), or PS_JOB_TOKEN_FILE to a file holding it"

static int auth_read_file(const char *path, struct psd_auth_secret *s)
{
	struct stat st;
	ssize_t got;
	size_t len = 0;
	int fd, ret = 0;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		ret = psd_neg_errno();
		return psd_set_errmsg(ret,
				      "PS_JOB_TOKEN_FILE %s: cannot open: %s",
				      path, psched_strerror(ret));
	}
	if (fstat(fd, &st)) {
		ret = psd_neg_errno();
		psd_set_errmsg(ret, "PS_JOB_TOKEN_FILE %s: %s", path,
			       psched_strerror(ret));
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		ret = psd_set_errmsg(-EINVAL,
				     "PS_JOB_TOKEN_FILE %s is not a regular "
				     "file",
				     path);
		goto out;
	}
	if (st.st_mode & (S_IWGRP | S_IWOTH)) {
		ret = psd_set_errmsg(-EACCES,
				     "PS_JOB_TOKEN_FILE %s is writable by "
				     "others (mode %03o): anyone could change "
				     "the job's secret; chmod go-w it",
				     path, (unsigned)(st.st_mode & 0777));
		goto out;
	}
	if (st.st_mode & S_IROTH)
		psd_warn("PS_JOB_TOKEN_FILE %s is readable by every user of "
			 "this machine (mode %03o): any of them can join the "
			 "job; chmod 600 it unless only this job's users see "
			 "it (a container's own volume)",
			 path, (unsigned)(st.st_mode & 0777));
	while (len < sizeof(s->key)) {
		got = read(fd, s->key + len, sizeof(s->key) - len);
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0) {
			ret = psd_neg_errno();
			psd_set_errmsg(ret, "PS_JOB_TOKEN_FILE %s: %s", path,
				       psched_strerror(ret));
			goto out;
		}
		if (!got)
			break;
		len += (size_t)got;
	}
	if (len == sizeof(s->key)) {
		char more;

		if (read(fd, &more, 1) == 1) {
			ret = psd_set_errmsg(-EINVAL,
					     "PS_JOB_TOKEN_FILE %s is larger "
					     "than %u bytes",
					     path, PSD_AUTH_SECRET_MAX - 1);
			goto out;
		}
	}
	if (len && s->key[len - 1] == '\n')
		len--;
	if (len && s->key[len - 1] == '\r')
		len--;
	if (!len) {
		ret = psd_set_errmsg(
			-EINVAL, "PS_JOB_TOKEN_FILE %s is empty: " AUTH_HOWTO,
			path);
		goto out;
	}
	s->len = len;
out:
	close(fd);
	return ret;
}

int psd_auth_secret_load(const struct psched_cfg *cfg,
			 struct psd_auth_secret *s)
{
	int ret;

	memset(s, 0, sizeof(*s));
	if (cfg->job_token[0] && cfg->job_token_file[0])
		return psd_set_errmsg(-EINVAL,
				      "both PS_JOB_TOKEN and PS_JOB_TOKEN_FILE "
				      "are set: set one of them");
	if (cfg->job_token[0]) {
		s->len = strlen(cfg->job_token);
		memcpy(s->key, cfg->job_token, s->len);
	} else if (cfg->job_token_file[0]) {
		ret = auth_read_file(cfg->job_token_file, s);
		if (ret) {
			memset(s, 0, sizeof(*s));
			return ret;
		}
	} else if (cfg->allow_unauthenticated) {
		s->none = true;
		psd_warn("PS_ALLOW_UNAUTHENTICATED=1 and no job secret: this "
			 "%s accepts anyone who reaches its ports, who can "
			 "join the job, read its tensors and change them; "
			 "%s",
			 psched_role_name(cfg->role), AUTH_HOWTO);
		return 0;
	} else {
		return psd_set_errmsg(-EACCES,
				      "%s: no job secret, and psched does not "
				      "run a job without one: " AUTH_HOWTO
				      " (or PS_ALLOW_UNAUTHENTICATED=1 to let "
				      "anyone who reaches the ports join)",
				      psched_role_name(cfg->role));
	}
	if (s->len < 16)
		psd_warn("the job secret is only %zu bytes: a recorded "
			 "handshake lets an attacker guess a short one "
			 "offline; use 16 or more random bytes",
			 s->len);
	return 0;
}

int psd_auth_nonce(uint8_t out[PSD_AUTH_NONCE_LEN])
{
	size_t got = 0;
	ssize_t r;

	while (got < PSD_AUTH_NONCE_LEN) {
		r = getrandom(out + got, PSD_AUTH_NONCE_LEN - got, 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return r < 0 ? psd_neg_errno() : -EIO;
		got += (size_t)r;
	}
	return 0;
}

void psd_auth_proof(const struct psd_auth_secret *s, bool responder,
		    enum psd_auth_kind kind, int32_t id, const uint8_t *n_i,
		    const uint8_t *n_r, uint8_t out[PSD_AUTH_PROOF_LEN])
{
	static const char label[] = "psched-auth-1";
	uint8_t head[6];
	struct psd_iov_c parts[4] = {
		{ label, sizeof(label) - 1 },
		{ head, sizeof(head) },
		{ n_i, PSD_AUTH_NONCE_LEN },
		{ n_r, PSD_AUTH_NONCE_LEN },
	};
	uint32_t u = (uint32_t)id;

	head[0] = responder ? 'R' : 'I';
	head[1] = (uint8_t)kind;
	head[2] = (uint8_t)u;
	head[3] = (uint8_t)(u >> 8);
	head[4] = (uint8_t)(u >> 16);
	head[5] = (uint8_t)(u >> 24);
	psd_hmac_sha256(s->key, s->len, parts, PSD_ARRAY_SIZE(parts), out);
}

bool psd_auth_check(const struct psd_auth_secret *s, bool responder,
		    enum psd_auth_kind kind, int32_t id, const uint8_t *n_i,
		    const uint8_t *n_r, const uint8_t *proof, size_t len)
{
	uint8_t want[PSD_AUTH_PROOF_LEN];
	bool ok;

	if (!proof || len != PSD_AUTH_PROOF_LEN)
		return false;
	psd_auth_proof(s, responder, kind, id, n_i, n_r, want);
	ok = psd_mem_equal_ct(want, proof, len);
	memset(want, 0, sizeof(want));
	return ok;
}

int psd_auth_start(struct psd_conn *c, int32_t id)
{
	uint8_t nonce[PSD_AUTH_NONCE_LEN];
	int ret = psd_auth_nonce(nonce);

	if (ret)
		return psd_set_errmsg(ret, "no random nonce: %s",
				      psched_strerror(ret));
	/* The van thread reads these when the answer comes: the answer
	 * follows our first message, but only the lock tells the memory
	 * model (and TSan) so. */
	pthread_mutex_lock(&c->send_lock);
	memcpy(c->nonce_mine, nonce, sizeof(nonce));
	c->auth_id = id;
	c->auth_step = 1;
	pthread_mutex_unlock(&c->send_lock);
	return 0;
}

int psd_auth_challenge(const struct psd_auth_secret *s, struct psd_conn *c,
		       int sender, enum psd_auth_kind kind, int32_t id,
		       const uint8_t *nonce, size_t len)
{
	Psched__Challenge ch = PSCHED__CHALLENGE__INIT;
	Psched__Control m = PSCHED__CONTROL__INIT;
	uint8_t proof[PSD_AUTH_PROOF_LEN];
	int ret;

	if (c->auth_step)
		return psd_set_errmsg(-EPROTO, "a second hello or "
					       "registration before "
					       "authenticating");
	if (!nonce || len != PSD_AUTH_NONCE_LEN)
		return psd_set_errmsg(-EPROTO,
				      "hello or registration without a %u-byte "
				      "nonce (%zu bytes): a psched older than "
				      "authentication, or no psched at all",
				      PSD_AUTH_NONCE_LEN, nonce ? len : 0);
	memcpy(c->nonce_peer, nonce, PSD_AUTH_NONCE_LEN);
	ret = psd_auth_nonce(c->nonce_mine);
	if (ret)
		return psd_set_errmsg(ret, "no random nonce: %s",
				      psched_strerror(ret));
	c->auth_id = id;
	c->auth_step = 1;
	psd_auth_proof(s, true, kind, id, c->nonce_peer, c->nonce_mine, proof);
	ch.nonce.data = c->nonce_mine;
	ch.nonce.len = PSD_AUTH_NONCE_LEN;
	ch.proof.data = proof;
	ch.proof.len = sizeof(proof);
	m.body_case = PSCHED__CONTROL__BODY_CHALLENGE;
	m.challenge = &ch;
	ret = psd_conn_send_control(c, sender, &m);
	if (ret)
		return psd_set_errmsg(ret, "cannot send the challenge: %s",
				      psched_strerror(ret));
	return 0;
}

int psd_auth_answer(const struct psd_auth_secret *s, struct psd_conn *c,
		    int sender, enum psd_auth_kind kind,
		    const Psched__Control *m, const char *who)
{
	Psched__Proof pr = PSCHED__PROOF__INIT;
	Psched__Control out = PSCHED__CONTROL__INIT;
	uint8_t proof[PSD_AUTH_PROOF_LEN];
	const Psched__Challenge *ch = m->challenge;
	uint8_t step;
	int ret;

	/* Written by psd_auth_start() on the connecting thread. */
	pthread_mutex_lock(&c->send_lock);
	step = c->auth_step;
	pthread_mutex_unlock(&c->send_lock);
	if (m->body_case != PSCHED__CONTROL__BODY_CHALLENGE || step != 1)
		return psd_set_errmsg(-EPROTO,
				      "%s sent message %d before "
				      "authenticating",
				      who, (int)m->body_case);
	if (ch->nonce.len != PSD_AUTH_NONCE_LEN ||
	    !psd_auth_check(s, true, kind, c->auth_id, c->nonce_mine,
			    ch->nonce.data, ch->proof.data, ch->proof.len))
		return psd_set_errmsg(
			-EACCES,
			"%s could not prove it knows this job's secret: set "
			"the same PS_JOB_TOKEN (or PS_JOB_TOKEN_FILE) on every "
			"node of the job%s",
			who,
			s->none ? " (this node runs without one, "
				  "PS_ALLOW_UNAUTHENTICATED=1)"
				: "");
	memcpy(c->nonce_peer, ch->nonce.data, PSD_AUTH_NONCE_LEN);
	psd_auth_proof(s, false, kind, c->auth_id, c->nonce_mine, c->nonce_peer,
		       proof);
	pr.proof.data = proof;
	pr.proof.len = sizeof(proof);
	out.body_case = PSCHED__CONTROL__BODY_PROOF;
	out.proof = &pr;
	ret = psd_conn_send_control(c, sender, &out);
	if (ret)
		return psd_set_errmsg(ret, "cannot send our proof to %s: %s",
				      who, psched_strerror(ret));
	c->auth_step = 2;
	psd_conn_set_authed(c);
	return 0;
}

int psd_auth_finish(const struct psd_auth_secret *s, struct psd_conn *c,
		    enum psd_auth_kind kind, const Psched__Control *m)
{
	if (m->body_case != PSCHED__CONTROL__BODY_PROOF || c->auth_step != 1)
		return psd_set_errmsg(-EPROTO,
				      "message %d before authenticating",
				      (int)m->body_case);
	if (!psd_auth_check(s, false, kind, c->auth_id, c->nonce_peer,
			    c->nonce_mine, m->proof->proof.data,
			    m->proof->proof.len))
		return psd_set_errmsg(-EACCES,
				      "its proof does not match this job's "
				      "secret (another or no PS_JOB_TOKEN on "
				      "that side, or not a node of this job)");
	c->auth_step = 2;
	psd_conn_set_authed(c);
	return 0;
}
