// SPDX-License-Identifier: MIT
/*
 * A delay line for one link of a namespace cluster, for a kernel without
 * netem: every frame that crosses it waits DELAY microseconds, in both
 * directions, in order.  It stands between a node's veth end in the
 * switch namespace (DEV, not a bridge port) and a tap device it creates
 * (TAP, which the caller adds to the bridge in DEV's place):
 *
 *   node eth0 <-veth-> DEV --(AF_PACKET)--> delay --> TAP (bridge port)
 *   node eth0 <-veth-> DEV <--(AF_PACKET)-- delay <-- TAP
 *
 * Frames carry a virtio-net header on both sides (PACKET_VNET_HDR, tap
 * IFF_VNET_HDR with checksum and TSO offloads), so GSO super-frames and
 * frames whose checksum is still to be filled in pass whole: the line
 * needs a syscall per GSO frame, not per MTU.  A tbf on DEV's egress
 * still shapes what the line sends toward the node (AF_PACKET output
 * goes through DEV's qdisc), and a full qdisc holds frames in the line
 * (backpressure) rather than dropping them.  Frames beyond --max-mib of
 * queued bytes are dropped and counted, like a router's full buffer.
 *
 * Usage (in the switch namespace, as root):
 *   delayline --dev DEV --tap TAP --delay-us N [--max-mib M] [--ready FILE]
 *             [--delay-file FILE]
 * Runs until SIGTERM/SIGINT, then prints one line of counters to stderr.
 * --ready FILE: written once the tap exists (the caller then attaches it).
 * --delay-file FILE: on SIGHUP the delay becomes the microseconds FILE
 * holds (a path that changes during a run, bench/ns-lib.sh
 * ns_delay_set); frames already queued keep their time, and frames leave
 * in order, so after a cut a new frame waits for the ones before it.  A
 * bad value is refused on stderr and the delay stays.
 */
#include <errno.h>
#include <net/if.h> /* before linux/if_tun.h, which pulls linux/if.h */
#include <fcntl.h>
#include <getopt.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <linux/if_tun.h>
#include <linux/virtio_net.h>
#include <malloc.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>

#define DL_FRAME_MAX (65536 + 256)
#define DL_BURST     64 /* frames read per wake-up per side */

#define DL_SMALL  2048 /* frames up to this are copied to their size */
#define DL_SPARES 1024 /* full-size frames kept for reuse, per side */

struct dl_frame {
	struct dl_frame *next;
	uint64_t due_ns;
	size_t len;
	bool full; /* room for DL_FRAME_MAX: goes back to the spares */
	unsigned char data[];
};

/* One direction: frames read from one side, written to the other. */
struct dl_dir {
	const char *name;
	struct dl_frame *head, *tail;
	size_t queued;
	uint64_t frames, bytes, dropped,
		held;		/* held: writes that had to wait */
	bool blocked;		/* the output side said EAGAIN */
	struct dl_frame *spare; /* full-size frames to read into */
	unsigned int nspare;
};

static volatile sig_atomic_t dl_stop, dl_reload;

static void dl_on_signal(int sig)
{
	if (sig == SIGHUP)
		dl_reload = 1;
	else
		dl_stop = 1;
}

static uint64_t dl_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int dl_tap_open(const char *name)
{
	struct ifreq ifr;
	unsigned int off = TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6;
	int fd;

	fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0) {
		fprintf(stderr, "delayline: /dev/net/tun: %s\n",
			strerror(errno));
		return -1;
	}
	memset(&ifr, 0, sizeof(ifr));
	ifr.ifr_flags = IFF_TAP | IFF_NO_PI | IFF_VNET_HDR;
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", name);
	if (ioctl(fd, TUNSETIFF, &ifr) < 0) {
		fprintf(stderr, "delayline: tap %s: %s\n", name,
			strerror(errno));
		goto err_close;
	}
	if (ioctl(fd, TUNSETOFFLOAD, off) < 0) {
		fprintf(stderr, "delayline: tap %s offloads: %s\n", name,
			strerror(errno));
		goto err_close;
	}
	return fd;

err_close:
	close(fd);
	return -1;
}

static int dl_packet_open(const char *dev)
{
	struct sockaddr_ll sll;
	int fd, one = 1, buf = 64 << 20;
	unsigned int idx = if_nametoindex(dev);

	if (!idx) {
		fprintf(stderr, "delayline: device %s: %s\n", dev,
			strerror(errno));
		return -1;
	}
	fd = socket(AF_PACKET, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC,
		    htons(ETH_P_ALL));
	if (fd < 0) {
		fprintf(stderr, "delayline: packet socket: %s\n",
			strerror(errno));
		return -1;
	}
	if (setsockopt(fd, SOL_PACKET, PACKET_VNET_HDR, &one, sizeof(one)) <
		    0 ||
	    setsockopt(fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one,
		       sizeof(one)) < 0) {
		fprintf(stderr, "delayline: packet options on %s: %s\n", dev,
			strerror(errno));
		goto err_close;
	}
	/* Big buffers: the line, not the socket, is where frames wait. */
	(void)setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &buf, sizeof(buf));
	(void)setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &buf, sizeof(buf));
	memset(&sll, 0, sizeof(sll));
	sll.sll_family = AF_PACKET;
	sll.sll_protocol = htons(ETH_P_ALL);
	sll.sll_ifindex = (int)idx;
	if (bind(fd, (struct sockaddr *)&sll, sizeof(sll)) < 0) {
		fprintf(stderr, "delayline: bind %s: %s\n", dev,
			strerror(errno));
		goto err_close;
	}
	return fd;

err_close:
	close(fd);
	return -1;
}

/* A full-size frame to read into: a spare, else a new one. */
static struct dl_frame *dl_get(struct dl_dir *d)
{
	struct dl_frame *f = d->spare;

	if (f) {
		d->spare = f->next;
		d->nspare--;
		return f;
	}
	f = malloc(sizeof(*f) + DL_FRAME_MAX);
	if (f)
		f->full = true;
	return f;
}

/* Done with @f: a full-size frame becomes a spare (up to DL_SPARES). */
static void dl_put(struct dl_dir *d, struct dl_frame *f)
{
	if (!f->full || d->nspare >= DL_SPARES) {
		free(f);
		return;
	}
	f->next = d->spare;
	d->spare = f;
	d->nspare++;
}

/* Queue @f (@len bytes read into it) on @d, due at @due_ns; dropped over
 * @max_queued.  A small frame (an ACK) is queued as a copy of its size,
 * so a queue of them does not hold a full-size frame each. */
static void dl_push(struct dl_dir *d, struct dl_frame *f, size_t len,
		    uint64_t due_ns, size_t max_queued)
{
	struct dl_frame *g;

	if (d->queued + len > max_queued) {
		d->dropped++;
		dl_put(d, f);
		return;
	}
	if (len <= DL_SMALL) {
		g = malloc(sizeof(*g) + len);
		if (g) {
			g->full = false;
			memcpy(g->data, f->data, len);
			dl_put(d, f);
			f = g;
		}
	}
	f->next = NULL;
	f->due_ns = due_ns;
	f->len = len;
	if (d->tail)
		d->tail->next = f;
	else
		d->head = f;
	d->tail = f;
	d->queued += len;
}

/* Read up to DL_BURST frames from @fd into @d, each straight into the
 * frame that queues it (large ones are not copied); -1 on a hard error. */
static int dl_read(int fd, struct dl_dir *d, uint64_t delay_ns,
		   size_t max_queued)
{
	struct dl_frame *f;
	ssize_t n;
	int i, err;

	for (i = 0; i < DL_BURST; i++) {
		f = dl_get(d);
		if (!f) {
			d->dropped++;
			return 0;
		}
		n = read(fd, f->data, DL_FRAME_MAX);
		if (n < 0) {
			err = errno;
			dl_put(d, f);
			if (err == EAGAIN || err == EINTR || err == ENETDOWN)
				return 0;
			fprintf(stderr, "delayline: read (%s): %s\n", d->name,
				strerror(err));
			return -1;
		}
		if ((size_t)n <= sizeof(struct virtio_net_hdr)) {
			dl_put(d, f);
			continue;
		}
		dl_push(d, f, (size_t)n, dl_now_ns() + delay_ns, max_queued);
	}
	return 0;
}

/* The frames still queued on @d and its spares, at exit. */
static void dl_free_queue(struct dl_dir *d)
{
	struct dl_frame *f;

	while ((f = d->head)) {
		d->head = f->next;
		free(f);
	}
	while ((f = d->spare)) {
		d->spare = f->next;
		free(f);
	}
	d->tail = NULL;
	d->queued = 0;
	d->nspare = 0;
}

/* Write every due frame of @d to @fd.  A full socket buffer (EAGAIN)
 * holds the frame for POLLOUT; a refusal (a full qdisc: ENOBUFS, a down
 * link, a bad size) drops it, as a wire would. */
static void dl_flush(int fd, struct dl_dir *d, uint64_t now)
{
	struct dl_frame *f;

	d->blocked = false;
	while ((f = d->head) && f->due_ns <= now) {
		ssize_t n = write(fd, f->data, f->len);

		if (n < 0) {
			if (errno == EAGAIN) {
				d->blocked = true;
				d->held++;
				return;
			}
			if (errno == EINTR)
				continue;
			d->dropped++;
		} else {
			d->frames++;
			d->bytes += f->len - sizeof(struct virtio_net_hdr);
		}
		d->head = f->next;
		if (!d->head)
			d->tail = NULL;
		d->queued -= f->len;
		dl_put(d, f);
	}
}

/* --NAME's value as an integer in [lo, hi]; false (said why) if not. */
static bool dl_parse_long(const char *name, const char *arg, long lo, long hi,
			  long *out)
{
	char *end;
	long v = strtol(arg, &end, 10);

	if (end == arg || *end || v < lo || v > hi) {
		fprintf(stderr, "delayline: --%s '%s': want %ld..%ld\n", name,
			arg, lo, hi);
		return false;
	}
	*out = v;
	return true;
}

static void dl_usage(void)
{
	fprintf(stderr, "usage: delayline --dev DEV --tap TAP --delay-us N "
			"[--max-mib M] [--ready FILE] [--delay-file FILE]\n");
}

/* SIGHUP: the delay @path holds, in microseconds; *@delay_us stays as it
 * was (said why) if the file cannot be read or holds no valid delay. */
static void dl_reload_delay(const char *dev, const char *path, long *delay_us)
{
	char line[64], *nl;
	long v;
	FILE *f;

	if (!path) {
		fprintf(stderr, "delayline %s: SIGHUP without --delay-file\n",
			dev);
		return;
	}
	f = fopen(path, "r");
	if (!f) {
		fprintf(stderr, "delayline %s: %s: %s\n", dev, path,
			strerror(errno));
		return;
	}
	if (!fgets(line, sizeof(line), f))
		line[0] = '\0';
	fclose(f);
	nl = strchr(line, '\n');
	if (nl)
		*nl = '\0';
	if (!dl_parse_long("delay-file", line, 0, 10000000, &v))
		return;
	fprintf(stderr, "delayline %s: delay %ld -> %ld us\n", dev, *delay_us,
		v);
	*delay_us = v;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "dev", required_argument, NULL, 'd' },
		{ "tap", required_argument, NULL, 't' },
		{ "delay-us", required_argument, NULL, 'u' },
		{ "max-mib", required_argument, NULL, 'm' },
		{ "ready", required_argument, NULL, 'r' },
		{ "delay-file", required_argument, NULL, 'f' },
		{ NULL, 0, NULL, 0 },
	};
	const char *dev = NULL, *tap = NULL, *ready = NULL, *dfile = NULL;
	long delay_us = -1, max_mib = 256;
	struct dl_dir to_tap = { .name = "node->bridge" };
	struct dl_dir to_dev = { .name = "bridge->node" };
	struct sigaction sa;
	sigset_t block, waitmask;
	uint64_t delay_ns;
	size_t max_queued;
	int c, tfd, pfd, ret = 1;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'd':
			dev = optarg;
			break;
		case 't':
			tap = optarg;
			break;
		case 'r':
			ready = optarg;
			break;
		case 'f':
			dfile = optarg;
			break;
		case 'u':
			if (!dl_parse_long("delay-us", optarg, 0, 10000000,
					   &delay_us))
				return 2;
			break;
		case 'm':
			if (!dl_parse_long("max-mib", optarg, 1, 4096,
					   &max_mib))
				return 2;
			break;
		default:
			dl_usage();
			return 2;
		}
	}
	if (!dev || !tap || delay_us < 0 || optind != argc) {
		dl_usage();
		return 2;
	}
	delay_ns = (uint64_t)delay_us * 1000u;
	max_queued = (size_t)max_mib << 20;
	/* Wake-ups on time: the default 50 us slack would add to the delay. */
	(void)prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
	/* Frames come and go by the thousand a second.  Full-size ones are
	 * reused (dl_get/dl_put); the small copies' memory stays in the heap
	 * rather than going back to the kernel and faulting in again.  With
	 * a fresh malloc and a copy per frame the line spent most of its time
	 * in page faults and moved 1.2-1.9 Gbit/s of one flow on a 5 Gbit/s
	 * link (a guest whose page faults are dear;
	 * bench/delayline-bench.sh). */
	(void)mallopt(M_MMAP_THRESHOLD, 1 << 20);
	(void)mallopt(M_TRIM_THRESHOLD, 512 << 20);

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = dl_on_signal;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	/* the signals arrive only inside ppoll(), so none is missed between
	 * the loop's look at the flags and the wait */
	sigemptyset(&block);
	sigaddset(&block, SIGTERM);
	sigaddset(&block, SIGINT);
	sigaddset(&block, SIGHUP);
	sigprocmask(SIG_BLOCK, &block, &waitmask);
	sigdelset(&waitmask, SIGTERM);
	sigdelset(&waitmask, SIGINT);
	sigdelset(&waitmask, SIGHUP);

	tfd = dl_tap_open(tap);
	if (tfd < 0)
		return 1;
	pfd = dl_packet_open(dev);
	if (pfd < 0)
		goto out_tap;
	if (ready) {
		FILE *f = fopen(ready, "w");

		if (!f || fclose(f)) {
			fprintf(stderr, "delayline: %s: %s\n", ready,
				strerror(errno));
			goto out_pkt;
		}
	}

	while (!dl_stop) {
		struct pollfd pfds[2] = {
			{ .fd = pfd, .events = POLLIN },
			{ .fd = tfd, .events = POLLIN },
		};
		uint64_t now = dl_now_ns(), next = UINT64_MAX;
		struct timespec ts, *tsp = NULL;

		if (dl_reload) {
			dl_reload = 0;
			dl_reload_delay(dev, dfile, &delay_us);
			delay_ns = (uint64_t)delay_us * 1000u;
		}
		dl_flush(tfd, &to_tap, now);
		dl_flush(pfd, &to_dev, now);
		/* A blocked side is waited for with POLLOUT, else on time. */
		if (to_tap.blocked)
			pfds[1].events |= POLLOUT;
		else if (to_tap.head)
			next = to_tap.head->due_ns;
		if (to_dev.blocked)
			pfds[0].events |= POLLOUT;
		else if (to_dev.head && to_dev.head->due_ns < next)
			next = to_dev.head->due_ns;
		if (next != UINT64_MAX) {
			uint64_t wait = next > now ? next - now : 0;

			ts.tv_sec = (time_t)(wait / 1000000000u);
			ts.tv_nsec = (long)(wait % 1000000000u);
			tsp = &ts;
		}
		if (ppoll(pfds, 2, tsp, &waitmask) < 0) {
			if (errno == EINTR)
				continue;
			fprintf(stderr, "delayline: poll: %s\n",
				strerror(errno));
			goto out_pkt;
		}
		if ((pfds[0].revents & POLLIN) &&
		    dl_read(pfd, &to_tap, delay_ns, max_queued))
			goto out_pkt;
		if ((pfds[1].revents & POLLIN) &&
		    dl_read(tfd, &to_dev, delay_ns, max_queued))
			goto out_pkt;
		if ((pfds[0].revents | pfds[1].revents) &
		    (POLLERR | POLLNVAL)) {
			fprintf(stderr, "delayline: %s: device error\n", dev);
			goto out_pkt;
		}
	}
	ret = 0;
	fprintf(stderr,
		"delayline %s: delay %ld us; %s %llu frames %llu bytes "
		"%llu dropped %llu held; %s %llu frames %llu bytes %llu "
		"dropped %llu held\n",
		dev, delay_us, to_tap.name, (unsigned long long)to_tap.frames,
		(unsigned long long)to_tap.bytes,
		(unsigned long long)to_tap.dropped,
		(unsigned long long)to_tap.held, to_dev.name,
		(unsigned long long)to_dev.frames,
		(unsigned long long)to_dev.bytes,
		(unsigned long long)to_dev.dropped,
		(unsigned long long)to_dev.held);
out_pkt:
	close(pfd);
	dl_free_queue(&to_tap);
	dl_free_queue(&to_dev);
out_tap:
	close(tfd);
	return ret;
}
