// SPDX-License-Identifier: MIT
/*
 * Control messages (proto/psched.proto via protobuf-c): pack/unpack round
 * trip of every body kind, the exact bytes of a few small ones, and
 * rejection of truncated, random and wrongly-typed encodings.
 */
#include <float.h>
#include <stdlib.h>
#include <string.h>

#include "../harness.h"
#include "psched.h"
#include "psched.pb-c.h"

#define RANDOM_BUFFERS 10000

/* Pack @m into a fresh buffer; *@len gets its size. */
static uint8_t *pack_at(const char *file, int line, const Psched__Control *m,
			size_t *len)
{
	size_t want = psched__control__get_packed_size(m);
	uint8_t *buf = malloc(want ? want : 1);
	size_t got;

	if (!buf)
		test_fail_at(file, line, "out of memory");
	got = psched__control__pack(m, buf);
	if (got != want) {
		free(buf);
		test_fail_at(file, line, "pack wrote %zu bytes, size said %zu",
			     got, want);
	}
	*len = got;
	return buf;
}

/* Pack, unpack, check the body kind; the caller frees the result. */
static Psched__Control *round_trip_at(const char *file, int line,
				      const Psched__Control *m)
{
	Psched__Control *out;
	uint8_t *buf;
	size_t len;

	buf = pack_at(file, line, m, &len);
	out = psched__control__unpack(NULL, len, buf);
	free(buf);
	if (!out)
		test_fail_at(file, line, "unpack of a packed message failed");
	if (out->body_case != m->body_case) {
		int got = (int)out->body_case;

		psched__control__free_unpacked(out, NULL);
		test_fail_at(file, line, "body case %d, want %d", got,
			     (int)m->body_case);
	}
	return out;
}

#define pack(m, len)  pack_at(__FILE__, __LINE__, (m), (len))
#define round_trip(m) round_trip_at(__FILE__, __LINE__, (m))

static void check_node_info(const Psched__NodeInfo *got,
			    const Psched__NodeInfo *want)
{
	CHECK(got != NULL);
	CHECK_EQ(got->id, want->id);
	CHECK_EQ(got->role, want->role);
	CHECK_EQ(got->rank, want->rank);
	CHECK_STR(got->host, want->host);
	CHECK_EQ(got->port, want->port);
}

/* Storage for the Register every garbage test starts from. */
struct reg_msg {
	char host[32];
	char transport[8];
	uint8_t nonce[32];
	Psched__NodeInfo ni;
	Psched__Register reg;
	Psched__Control m;
};

static void reg_msg_init(struct reg_msg *r)
{
	Psched__NodeInfo ni = PSCHED__NODE_INFO__INIT;
	Psched__Register reg = PSCHED__REGISTER__INIT;
	Psched__Control m = PSCHED__CONTROL__INIT;

	memset(r, 0, sizeof(*r));
	strcpy(r->host, "node-17.cluster.example");
	strcpy(r->transport, "rdma");
	r->ni = ni;
	r->reg = reg;
	r->m = m;
	r->ni.id = -1;
	r->ni.role = PSCHED__ROLE__WORKER;
	r->ni.rank = -1;
	r->ni.host = r->host;
	r->ni.port = 65535;
	r->reg.node = &r->ni;
	r->reg.transport = r->transport;
	r->reg.num_server = 8;
	r->reg.num_worker = 4096;
	r->reg.pid = INT32_MAX;
	memset(r->nonce, 0xab, sizeof(r->nonce));
	r->reg.nonce.data = r->nonce;
	r->reg.nonce.len = sizeof(r->nonce);
	r->m.body_case = PSCHED__CONTROL__BODY_REG;
	r->m.reg = &r->reg;
}

/* ---- round trips --------------------------------------------------- */

static void test_proto_register(void)
{
	struct reg_msg r;
	Psched__Control *out;

	reg_msg_init(&r);
	out = round_trip(&r.m);
	CHECK(out->reg != NULL);
	check_node_info(out->reg->node, &r.ni);
	CHECK_STR(out->reg->transport, "rdma");
	CHECK_EQ(out->reg->num_server, 8);
	CHECK_EQ(out->reg->num_worker, 4096);
	CHECK_EQ(out->reg->pid, INT32_MAX);
	CHECK_EQ(out->reg->nonce.len, 32);
	CHECK(memcmp(out->reg->nonce.data, r.nonce, 32) == 0);
	psched__control__free_unpacked(out, NULL);

	/* Negative pid, server role, no nonce. */
	r.reg.pid = -12345;
	r.reg.nonce.len = 0;
	r.ni.role = PSCHED__ROLE__SERVER;
	r.ni.id = INT32_MIN;
	out = round_trip(&r.m);
	CHECK_EQ(out->reg->pid, -12345);
	CHECK_EQ(out->reg->nonce.len, 0);
	CHECK_EQ(out->reg->node->role, PSCHED__ROLE__SERVER);
	CHECK_EQ(out->reg->node->id, INT32_MIN);
	psched__control__free_unpacked(out, NULL);
}

static void test_proto_node_table(void)
{
	Psched__NodeInfo ni[3] = { PSCHED__NODE_INFO__INIT,
				   PSCHED__NODE_INFO__INIT,
				   PSCHED__NODE_INFO__INIT };
	Psched__NodeInfo *nodes[3] = { &ni[0], &ni[1], &ni[2] };
	Psched__NodeTable t = PSCHED__NODE_TABLE__INIT;
	Psched__Control m = PSCHED__CONTROL__INIT;
	char hosts[3][16] = { "10.0.0.1", "10.0.0.2", "" };
	Psched__Control *out;
	size_t i;

	for (i = 0; i < 3; i++) {
		ni[i].id = (int32_t)(i + 1);
		ni[i].role = (Psched__Role)i; /* scheduler, server, worker */
		ni[i].rank = i == 0 ? -1 : (int32_t)i - 1;
		ni[i].host = hosts[i];
		ni[i].port = (uint32_t)(9091 + i * 1000);
	}
	t.your_id = 3;
	t.n_nodes = 3;
	t.nodes = nodes;
	m.body_case = PSCHED__CONTROL__BODY_TABLE;
	m.table = &t;
	out = round_trip(&m);
	CHECK(out->table != NULL);
	CHECK_EQ(out->table->your_id, 3);
	CHECK_EQ(out->table->n_nodes, 3);
	for (i = 0; i < 3; i++)
		check_node_info(out->table->nodes[i], &ni[i]);
	CHECK_EQ(out->table->nodes[0]->role, PSCHED__ROLE__SCHEDULER);
	CHECK_EQ(out->table->nodes[2]->role, PSCHED__ROLE__WORKER);
	CHECK_STR(out->table->nodes[2]->host, "");
	psched__control__free_unpacked(out, NULL);
}

static void test_proto_hello(void)
{
	Psched__Hello h = PSCHED__HELLO__INIT;
	Psched__Control m = PSCHED__CONTROL__INIT;
	Psched__Control *out;

	uint8_t nonce[32];

	memset(nonce, 0x5a, sizeof(nonce));
	h.id = 42;
	h.nonce.data = nonce;
	h.nonce.len = sizeof(nonce);
	m.body_case = PSCHED__CONTROL__BODY_HELLO;
	m.hello = &h;
	out = round_trip(&m);
	CHECK_EQ(out->hello->id, 42);
	CHECK_EQ(out->hello->nonce.len, 32);
	CHECK(memcmp(out->hello->nonce.data, nonce, 32) == 0);
	/* Unset: channel 0, one connection for both directions. */
	CHECK_EQ(out->hello->channel, 0);
	psched__control__free_unpacked(out, NULL);
	h.channel = 2; /* the answers connection of a split pair */
	out = round_trip(&m);
	CHECK_EQ(out->hello->channel, 2);
	CHECK_EQ(out->hello->id, 42);
	psched__control__free_unpacked(out, NULL);
}

/* The handshake's Challenge and Proof (common/auth.h). */
static void test_proto_challenge_proof(void)
{
	Psched__Challenge ch = PSCHED__CHALLENGE__INIT;
	Psched__Proof pr = PSCHED__PROOF__INIT;
	Psched__Control m = PSCHED__CONTROL__INIT;
	uint8_t nonce[32], proof[32];
	Psched__Control *out;
	unsigned i;

	for (i = 0; i < 32; i++) {
		nonce[i] = (uint8_t)i;
		proof[i] = (uint8_t)(255 - i);
	}
	ch.nonce.data = nonce;
	ch.nonce.len = 32;
	ch.proof.data = proof;
	ch.proof.len = 32;
	m.body_case = PSCHED__CONTROL__BODY_CHALLENGE;
	m.challenge = &ch;
	out = round_trip(&m);
	CHECK_EQ(out->body_case, PSCHED__CONTROL__BODY_CHALLENGE);
	CHECK_EQ(out->challenge->nonce.len, 32);
	CHECK_EQ(out->challenge->proof.len, 32);
	CHECK(memcmp(out->challenge->nonce.data, nonce, 32) == 0);
	CHECK(memcmp(out->challenge->proof.data, proof, 32) == 0);
	psched__control__free_unpacked(out, NULL);

	pr.proof.data = proof;
	pr.proof.len = 32;
	m.body_case = PSCHED__CONTROL__BODY_PROOF;
	m.proof = &pr;
	out = round_trip(&m);
	CHECK_EQ(out->body_case, PSCHED__CONTROL__BODY_PROOF);
	CHECK(memcmp(out->proof->proof.data, proof, 32) == 0);
	psched__control__free_unpacked(out, NULL);
}

/* A hello from before authentication (id and the token in field 2) still
 * decodes, with no nonce: the server refuses it for that. */
static void test_proto_old_hello(void)
{
	static const uint8_t old[] = { 0x1a, 0x04, 0x08, 0x03, 0x10, 0x07 };
	Psched__Control *out = psched__control__unpack(NULL, sizeof(old), old);

	CHECK(out != NULL);
	CHECK_EQ(out->body_case, PSCHED__CONTROL__BODY_HELLO);
	CHECK_EQ(out->hello->id, 3);
	CHECK_EQ(out->hello->nonce.len, 0);
	psched__control__free_unpacked(out, NULL);
}

static void test_proto_barrier(void)
{
	Psched__Barrier b = PSCHED__BARRIER__INIT;
	Psched__Control m = PSCHED__CONTROL__INIT;
	Psched__Control *out;

	b.group = PSCHED_GROUP_SERVERS | PSCHED_GROUP_WORKERS;
	b.seq = (1ull << 63) + 5;
	m.body_case = PSCHED__CONTROL__BODY_BARRIER;
	m.barrier = &b;
	out = round_trip(&m);
	CHECK_EQ(out->barrier->group, 6);
	CHECK_U64(out->barrier->seq, ==, (1ull << 63) + 5);
	psched__control__free_unpacked(out, NULL);
}

static void test_proto_heartbeat(void)
{
	Psched__Heartbeat hb = PSCHED__HEARTBEAT__INIT;
	Psched__Control m = PSCHED__CONTROL__INIT;
	Psched__Control *out;

	hb.time_us = 1700000000123456ull;
	m.body_case = PSCHED__CONTROL__BODY_HEARTBEAT;
	m.heartbeat = &hb;
	out = round_trip(&m);
	CHECK_U64(out->heartbeat->time_us, ==, 1700000000123456ull);
	psched__control__free_unpacked(out, NULL);
}

static void test_proto_node_failure(void)
{
	Psched__NodeFailure f = PSCHED__NODE_FAILURE__INIT;
	Psched__Control m = PSCHED__CONTROL__INIT;
	char reason[] = "no heartbeat for 10 s";
	Psched__Control *out;

	f.id = 9;
	f.role = PSCHED__ROLE__SERVER;
	f.rank = 2;
	f.reason = reason;
	m.body_case = PSCHED__CONTROL__BODY_FAILURE;
	m.failure = &f;
	out = round_trip(&m);
	CHECK_EQ(out->failure->id, 9);
	CHECK_EQ(out->failure->role, PSCHED__ROLE__SERVER);
	CHECK_EQ(out->failure->rank, 2);
	CHECK_STR(out->failure->reason, "no heartbeat for 10 s");
	psched__control__free_unpacked(out, NULL);
}

static void test_proto_abort(void)
{
	Psched__Abort a = PSCHED__ABORT__INIT;
	Psched__Control m = PSCHED__CONTROL__INIT;
	char reason[300];
	Psched__Control *out;

	/* Long enough for a two-byte length prefix. */
	memset(reason, 'r', sizeof(reason) - 1);
	reason[sizeof(reason) - 1] = '\0';
	a.reason = reason;
	m.body_case = PSCHED__CONTROL__BODY_ABORT;
	m.abort = &a;
	out = round_trip(&m);
	CHECK_EQ(strlen(out->abort->reason), 299);
	CHECK_STR(out->abort->reason, reason);
	psched__control__free_unpacked(out, NULL);
}

static void test_proto_finalize_and_shutdown(void)
{
	Psched__Finalize fin = PSCHED__FINALIZE__INIT;
	Psched__Shutdown sd = PSCHED__SHUTDOWN__INIT;
	Psched__Control m = PSCHED__CONTROL__INIT;
	Psched__Control *out;
	uint8_t *buf;
	size_t len;

	m.body_case = PSCHED__CONTROL__BODY_FINALIZE;
	m.finalize = &fin;
	/* An empty body is still sent: tag 8, length 0. */
	buf = pack(&m, &len);
	CHECK_EQ(len, 2);
	CHECK_EQ(buf[0], (8 << 3) | 2);
	CHECK_EQ(buf[1], 0);
	free(buf);
	out = round_trip(&m);
	CHECK(out->finalize != NULL);
	psched__control__free_unpacked(out, NULL);

	m.body_case = PSCHED__CONTROL__BODY_SHUTDOWN;
	m.shutdown = &sd;
	buf = pack(&m, &len);
	CHECK_EQ(len, 2);
	CHECK_EQ(buf[0], (9 << 3) | 2);
	CHECK_EQ(buf[1], 0);
	free(buf);
	out = round_trip(&m);
	CHECK(out->shutdown != NULL);
	psched__control__free_unpacked(out, NULL);
}

static void test_proto_config(void)
{
	Psched__Config c = PSCHED__CONFIG__INIT;
	Psched__Control m = PSCHED__CONTROL__INIT;
	Psched__Control *out;

	c.epoch = UINT32_MAX;
	c.partition_bytes = 4ull << 20;
	c.credit_bytes = UINT64_MAX;
	c.apply_from_step = 1000001;
	m.body_case = PSCHED__CONTROL__BODY_CONFIG;
	m.config = &c;
	out = round_trip(&m);
	CHECK_U64(out->config->epoch, ==, UINT32_MAX);
	CHECK_U64(out->config->partition_bytes, ==, 4ull << 20);
	CHECK_U64(out->config->credit_bytes, ==, UINT64_MAX);
	CHECK_U64(out->config->apply_from_step, ==, 1000001);
	psched__control__free_unpacked(out, NULL);
}

static void test_proto_metrics(void)
{
	Psched__Metrics mt = PSCHED__METRICS__INIT;
	Psched__Control m = PSCHED__CONTROL__INIT;
	Psched__Control *out;

	mt.step = 77;
	mt.bytes_pushed = 123456789012ull;
	mt.bytes_pulled = 987654321098ull;
	mt.step_time_s = 0.1; /* not exact in binary: bits must survive */
	mt.epoch = 3;
	m.body_case = PSCHED__CONTROL__BODY_METRICS;
	m.metrics = &mt;
	out = round_trip(&m);
	CHECK_U64(out->metrics->step, ==, 77);
	CHECK_U64(out->metrics->bytes_pushed, ==, 123456789012ull);
	CHECK_U64(out->metrics->bytes_pulled, ==, 987654321098ull);
	CHECK(memcmp(&out->metrics->step_time_s, &mt.step_time_s,
		     sizeof(double)) == 0);
	CHECK_EQ(out->metrics->epoch, 3);
	psched__control__free_unpacked(out, NULL);

	mt.step_time_s = DBL_MAX;
	out = round_trip(&m);
	CHECK(out->metrics->step_time_s == DBL_MAX);
	psched__control__free_unpacked(out, NULL);
}

/* The exact bytes of a small message: tag/length framing as proto3. */
static void test_proto_hello_bytes(void)
{
	static const uint8_t want[] = { 0x1a, 0x06, 0x08, 0x01,
					0x1a, 0x02, 0x01, 0x02 };
	static uint8_t nonce[2] = { 1, 2 };
	Psched__Hello h = PSCHED__HELLO__INIT;
	Psched__Control m = PSCHED__CONTROL__INIT;
	uint8_t *buf;
	size_t len;

	h.id = 1;
	h.nonce.data = nonce;
	h.nonce.len = sizeof(nonce);
	m.body_case = PSCHED__CONTROL__BODY_HELLO;
	m.hello = &h;
	buf = pack(&m, &len);
	CHECK_EQ(len, sizeof(want));
	CHECK(memcmp(buf, want, sizeof(want)) == 0);
	free(buf);
}

static void test_proto_empty_control(void)
{
	Psched__Control m = PSCHED__CONTROL__INIT;
	Psched__Control *out;
	uint8_t *buf;
	size_t len;

	buf = pack(&m, &len);
	CHECK_EQ(len, 0);
	out = psched__control__unpack(NULL, 0, buf);
	free(buf);
	CHECK(out != NULL);
	CHECK_EQ(out->body_case, PSCHED__CONTROL__BODY__NOT_SET);
	psched__control__free_unpacked(out, NULL);
}

/* Two members of the oneof on the wire: the last one wins. */
static void test_proto_oneof_last_wins(void)
{
	static const uint8_t bytes[] = {
		0x1a, 0x02, 0x08, 0x05, /* hello { id: 5 } */
		0x22, 0x02, 0x08, 0x07, /* barrier { group: 7 } */
	};
	Psched__Control *out;

	out = psched__control__unpack(NULL, sizeof(bytes), bytes);
	CHECK(out != NULL);
	CHECK_EQ(out->body_case, PSCHED__CONTROL__BODY_BARRIER);
	CHECK_EQ(out->barrier->group, 7);
	psched__control__free_unpacked(out, NULL);
}

/* ---- garbage ------------------------------------------------------- */

/* Whatever decoded must be usable: a valid case with its body present,
 * and it must pack again. */
static void check_sane_at(const char *file, int line, Psched__Control *out)
{
	size_t size;
	uint8_t *buf;

	if ((unsigned)out->body_case > PSCHED__CONTROL__BODY_METRICS)
		test_fail_at(file, line, "body case %d out of range",
			     (int)out->body_case);
	if (out->body_case != PSCHED__CONTROL__BODY__NOT_SET && !out->reg)
		test_fail_at(file, line, "body case %d with a NULL body",
			     (int)out->body_case);
	switch (out->body_case) {
	case PSCHED__CONTROL__BODY_REG:
		if (!out->reg->transport)
			test_fail_at(file, line, "NULL transport");
		if (out->reg->node && !out->reg->node->host)
			test_fail_at(file, line, "NULL host");
		break;
	case PSCHED__CONTROL__BODY_TABLE: {
		size_t i;

		if (out->table->n_nodes && !out->table->nodes)
			test_fail_at(file, line, "NULL node array");
		for (i = 0; i < out->table->n_nodes; i++)
			if (!out->table->nodes[i] ||
			    !out->table->nodes[i]->host)
				test_fail_at(file, line, "NULL node %zu", i);
		break;
	}
	case PSCHED__CONTROL__BODY_FAILURE:
		if (!out->failure->reason)
			test_fail_at(file, line, "NULL reason");
		break;
	case PSCHED__CONTROL__BODY_ABORT:
		if (!out->abort->reason)
			test_fail_at(file, line, "NULL reason");
		break;
	default:
		break;
	}
	size = psched__control__get_packed_size(out);
	buf = malloc(size ? size : 1);
	if (!buf)
		test_fail_at(file, line, "out of memory");
	if (psched__control__pack(out, buf) != size)
		test_fail_at(file, line, "re-pack size mismatch");
	free(buf);
}

#define check_sane(out) check_sane_at(__FILE__, __LINE__, (out))

static void test_proto_truncated_register(void)
{
	struct reg_msg r;
	Psched__Control *out;
	uint8_t *buf;
	size_t len, k;

	reg_msg_init(&r);
	buf = pack(&r.m, &len);
	CHECK_INT(len, >, 40);
	/* The empty prefix is an empty Control. */
	out = psched__control__unpack(NULL, 0, buf);
	CHECK(out != NULL);
	CHECK_EQ(out->body_case, PSCHED__CONTROL__BODY__NOT_SET);
	psched__control__free_unpacked(out, NULL);
	/* Every other prefix cuts the reg field short of its length. */
	for (k = 1; k < len; k++) {
		out = psched__control__unpack(NULL, k, buf);
		if (out) {
			check_sane(out);
			psched__control__free_unpacked(out, NULL);
			free(buf);
			test_fail_at(__FILE__, __LINE__,
				     "prefix of %zu of %zu bytes decoded", k,
				     len);
		}
	}
	free(buf);
}

/*
 * Prefixes of the Register itself, re-framed with a correct outer length:
 * exactly those that end between two top-level fields decode, and every
 * field they hold is either the original value or the default.
 */
static void test_proto_truncated_register_reframed(void)
{
	struct reg_msg r;
	Psched__Register *reg;
	Psched__Control *out;
	uint8_t *inner, frame[256];
	size_t len, k, decoded = 0;

	reg_msg_init(&r);
	len = psched__register__get_packed_size(&r.reg);
	CHECK_INT(len, <, 127); /* one-byte outer length below */
	inner = malloc(len);
	CHECK(inner != NULL);
	CHECK_EQ(psched__register__pack(&r.reg, inner), len);
	for (k = 0; k <= len; k++) {
		frame[0] = 0x0a; /* field 1 (reg), length-delimited */
		frame[1] = (uint8_t)k;
		memcpy(frame + 2, inner, k);
		out = psched__control__unpack(NULL, k + 2, frame);
		if (!out)
			continue;
		decoded++;
		check_sane(out);
		CHECK_EQ(out->body_case, PSCHED__CONTROL__BODY_REG);
		reg = out->reg;
		if (reg->node)
			check_node_info(reg->node, &r.ni);
		CHECK(!strcmp(reg->transport, "") ||
		      !strcmp(reg->transport, "rdma"));
		CHECK(reg->num_server == 0 || reg->num_server == 8);
		CHECK(reg->num_worker == 0 || reg->num_worker == 4096);
		CHECK(reg->pid == 0 || reg->pid == INT32_MAX);
		CHECK(reg->nonce.len == 0 ||
		      (reg->nonce.len == 32 && reg->nonce.data[31] == 0xab));
		psched__control__free_unpacked(out, NULL);
	}
	free(inner);
	/* Six fields set: the empty prefix and one after each field. */
	CHECK_EQ(decoded, 7);
}

static void test_proto_random_buffers(void)
{
	uint8_t buf[96];
	Psched__Control *out;
	size_t i, j, len, decoded = 0;

	test_rng_seed(0x70726f746f627566ull);
	for (i = 0; i < RANDOM_BUFFERS; i++) {
		len = (size_t)test_rng_below(sizeof(buf) + 1);
		for (j = 0; j < len; j++)
			buf[j] = (uint8_t)test_rng_next();
		/* Half of them start like a real body: a known field,
		 * length-delimited, with a plausible length. */
		if (len >= 2 && test_rng_below(2)) {
			buf[0] = (uint8_t)((1 + test_rng_below(11)) << 3 | 2);
			buf[1] = (uint8_t)test_rng_below(len - 1);
		}
		out = psched__control__unpack(NULL, len, buf);
		if (!out)
			continue;
		decoded++;
		check_sane(out);
		psched__control__free_unpacked(out, NULL);
	}
	/* Some must get through the parser for the check to mean much. */
	CHECK_INT(decoded, >, 100);
}

static void test_proto_wrong_wire_type(void)
{
	/* field 1 (reg) as fixed32 instead of a message */
	static const uint8_t fixed32[] = { 0x0d, 0x01, 0x02, 0x03, 0x04 };
	/* field 4 (barrier) as a varint */
	static const uint8_t varint[] = { 0x20, 0x01 };
	/* field 10 (config) as fixed64 */
	static const uint8_t fixed64[] = { 0x51, 1, 2, 3, 4, 5, 6, 7, 8 };
	/* reg { node: varint 1 }: wrong type one level down */
	static const uint8_t nested[] = { 0x0a, 0x02, 0x08, 0x01 };
	/* hello { id: a length-delimited field } */
	static const uint8_t nested_len[] = { 0x1a, 0x03, 0x0a, 0x01, 0x41 };
	/* reg with a length far beyond the buffer */
	static const uint8_t huge_len[] = {
		0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f
	};
	/* a varint that never ends */
	static const uint8_t endless[] = { 0x20, 0xff, 0xff, 0xff, 0xff, 0xff,
					   0xff, 0xff, 0xff, 0xff, 0xff, 0xff };
	/* field number 0 is invalid */
	static const uint8_t field0[] = { 0x02, 0x00 };

	CHECK(psched__control__unpack(NULL, sizeof(fixed32), fixed32) == NULL);
	CHECK(psched__control__unpack(NULL, sizeof(varint), varint) == NULL);
	CHECK(psched__control__unpack(NULL, sizeof(fixed64), fixed64) == NULL);
	CHECK(psched__control__unpack(NULL, sizeof(nested), nested) == NULL);
	CHECK(psched__control__unpack(NULL, sizeof(nested_len), nested_len) ==
	      NULL);
	CHECK(psched__control__unpack(NULL, sizeof(huge_len), huge_len) ==
	      NULL);
	CHECK(psched__control__unpack(NULL, sizeof(endless), endless) == NULL);
	CHECK(psched__control__unpack(NULL, sizeof(field0), field0) == NULL);
}

const struct test_case test_list[] = {
	{ "proto_register", test_proto_register },
	{ "proto_node_table", test_proto_node_table },
	{ "proto_hello", test_proto_hello },
	{ "proto_challenge_proof", test_proto_challenge_proof },
	{ "proto_old_hello", test_proto_old_hello },
	{ "proto_barrier", test_proto_barrier },
	{ "proto_heartbeat", test_proto_heartbeat },
	{ "proto_node_failure", test_proto_node_failure },
	{ "proto_abort", test_proto_abort },
	{ "proto_finalize_and_shutdown", test_proto_finalize_and_shutdown },
	{ "proto_config", test_proto_config },
	{ "proto_metrics", test_proto_metrics },
	{ "proto_hello_bytes", test_proto_hello_bytes },
	{ "proto_empty_control", test_proto_empty_control },
	{ "proto_oneof_last_wins", test_proto_oneof_last_wins },
	{ "proto_truncated_register", test_proto_truncated_register },
	{ "proto_truncated_register_reframed",
	  test_proto_truncated_register_reframed },
	{ "proto_random_buffers", test_proto_random_buffers },
	{ "proto_wrong_wire_type", test_proto_wrong_wire_type },
	{ NULL, NULL },
};
