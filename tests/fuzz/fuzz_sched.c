// SPDX-License-Identifier: MIT
/*
 * libFuzzer harness: the scheduler's control plane, in process.  A real
 * scheduler node (1 server, 1 worker expected) listens on loopback TCP;
 * each input is one connection that sends the input's frames (magic,
 * version and reserved word fixed, see fuzz_util.h) and half-closes, and
 * the harness reads until the scheduler closes it: every frame was then
 * handled (decode, protobuf-c unpack, Register / Barrier / Heartbeat /
 * Finalize / ConfigAck / Metrics / anything else).  Scheduler state
 * carries over between inputs (a rendezvous can complete, nodes can be
 * declared dead); once the scheduler shuts down, a new one is started.
 */
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fuzz_util.h"
#include "node.h"

static struct psched_node *sched;
static unsigned inputs;

static void fz_sched_restart(void)
{
	struct psched_cfg cfg;

	if (sched)
		psched_node_destroy(sched);
	psd_cfg_defaults(&cfg);
	cfg.role = PSCHED_ROLE_SCHEDULER;
	snprintf(cfg.root_uri, sizeof(cfg.root_uri), "127.0.0.1");
	cfg.root_port = 0;
	cfg.num_server = 1;
	cfg.num_worker = 1;
	snprintf(cfg.transport, sizeof(cfg.transport), "tcp");
	snprintf(cfg.job_token, sizeof(cfg.job_token), "fuzz-job-token");
	cfg.heartbeat_timeout_ms = 1000;
	cfg.connect_timeout_ms = 5000;
	if (psched_node_create(&cfg, &sched)) {
		fprintf(stderr, "fuzz_sched: no scheduler: %s\n",
			psched_errmsg());
		abort();
	}
	psd_log_level = -1;
}

static int fz_connect(unsigned port)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	if (fd < 0)
		abort();
	if (connect(fd, (struct sockaddr *)&a, sizeof(a))) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Write all of @p; false if the scheduler closed first. */
static bool fz_write(int fd, const uint8_t *p, size_t len)
{
	ssize_t r;

	while (len) {
		r = send(fd, p, len, MSG_NOSIGNAL);
		if (r <= 0)
			return false;
		p += r;
		len -= (size_t)r;
	}
	return true;
}

/* Read and drop until EOF, error, or 2 s of silence. */
static void fz_drain(int fd)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	uint8_t buf[4096];

	while (poll(&pfd, 1, 2000) > 0 && recv(fd, buf, sizeof(buf), 0) > 0)
		;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t hdr[PSD_HDR_SIZE];
	size_t off = 0, len;
	uint64_t plen;
	int fd;

	if (!sched || sched->shutdown || sched->fatal || ++inputs % 500 == 0)
		fz_sched_restart();
	fd = fz_connect(psched_node_port(sched));
	if (fd < 0) {
		fz_sched_restart();
		return 0;
	}
	while (size - off >= PSD_HDR_SIZE) {
		memcpy(hdr, data + off, PSD_HDR_SIZE);
		memcpy(hdr, "PSD1", 4);
		hdr[4] = PSD_HDR_VERSION;
		memset(hdr + 92, 0, 4);
		off += PSD_HDR_SIZE;
		plen = 0;
		for (len = 0; len < 8; len++)
			plen |= (uint64_t)hdr[48 + len] << (8 * len);
		len = plen < size - off ? (size_t)plen : size - off;
		if (!fz_write(fd, hdr, sizeof(hdr)) ||
		    !fz_write(fd, data + off, len))
			break;
		off += len;
		if (len < plen)
			break; /* truncated: the half-close ends it */
	}
	shutdown(fd, SHUT_WR);
	fz_drain(fd);
	close(fd);
	return 0;
}
