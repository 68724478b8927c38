/*
 * fi_stream.c -- the raw provider's one-way streaming bandwidth, as the
 * reference pcor's streaming figure is held against: one RDM endpoint per
 * side, the receiver keeps WINDOW receives posted, the sender keeps WINDOW
 * sends in flight, and the receiver answers one byte when all arrived.
 *
 *   fi_stream -p PROVIDER -B PORT [-s SIZE] [-n COUNT] [-w WINDOW]   (receiver)
 *   fi_stream -p PROVIDER -P PORT HOST [-s SIZE] [-n COUNT] [-w WINDOW]
 *
 * The endpoints swap addresses over one TCP connection.  The sender
 * prints "size,count,seconds,MB/s".  Exit status 0 on success.
 */
#define _GNU_SOURCE
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>

#include <arpa/inet.h>
#include <netdb.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_WINDOW 64

static void die(const char *what, int rc)
{
	fprintf(stderr, "fi_stream: %s: %s\n", what,
		rc < 0 ? fi_strerror(-rc) : "failed");
	exit(1);
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The out-of-band connection: listen on port, or connect to host:port. */
static int oob_connect(const char *host, const char *port)
{
	struct addrinfo hints = {.ai_family = AF_INET,
				 .ai_socktype = SOCK_STREAM,
				 .ai_flags = host ? 0 : AI_PASSIVE};
	struct addrinfo *ai;
	if (getaddrinfo(host, port, &hints, &ai))
		die("getaddrinfo", 0);
	int s = socket(ai->ai_family, ai->ai_socktype, 0);
	if (s < 0)
		die("socket", 0);
	if (host) {
		/* The receiver may not listen yet: bounded retries. */
		int tries = 0;
		while (connect(s, ai->ai_addr, ai->ai_addrlen)) {
			if (++tries > 200)
				die("connect", 0);
			usleep(10000);
		}
	} else {
		int one = 1;
		setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(s, ai->ai_addr, ai->ai_addrlen) || listen(s, 1))
			die("bind/listen", 0);
		int c = accept(s, NULL, NULL);
		if (c < 0)
			die("accept", 0);
		close(s);
		s = c;
	}
	freeaddrinfo(ai);
	return s;
}

static void xfer(int s, void *buf, size_t len, int send_it)
{
	char *p = buf;
	while (len) {
		ssize_t n = send_it ? write(s, p, len) : read(s, p, len);
		if (n <= 0)
			die("address exchange", 0);
		p += n;
		len -= (size_t)n;
	}
}

typedef struct ep {
	struct fi_info *fi;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_av *av;
	struct fid_cq *cq;
	struct fid_ep *ep;
} ep_t;

static void ep_open(ep_t *e, const char *prov)
{
	struct fi_info *h = fi_allocinfo();
	h->ep_attr->type = FI_EP_RDM;
	h->caps = FI_MSG;
	h->mode = FI_CONTEXT;
	h->domain_attr->mr_mode = FI_MR_VIRT_ADDR | FI_MR_PROV_KEY |
				  FI_MR_ALLOCATED;
	h->fabric_attr->prov_name = strdup(prov);
	int rc = fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, h, &e->fi);
	fi_freeinfo(h);
	if (rc)
		die("fi_getinfo", rc);
	struct fi_cq_attr cqa = {.format = FI_CQ_FORMAT_CONTEXT,
				 .size = 4 * MAX_WINDOW};
	struct fi_av_attr ava = {.type = FI_AV_UNSPEC};
	if ((rc = fi_fabric(e->fi->fabric_attr, &e->fabric, NULL)) ||
	    (rc = fi_domain(e->fabric, e->fi, &e->domain, NULL)) ||
	    (rc = fi_cq_open(e->domain, &cqa, &e->cq, NULL)) ||
	    (rc = fi_av_open(e->domain, &ava, &e->av, NULL)) ||
	    (rc = fi_endpoint(e->domain, e->fi, &e->ep, NULL)) ||
	    (rc = fi_ep_bind(e->ep, &e->cq->fid, FI_SEND | FI_RECV)) ||
	    (rc = fi_ep_bind(e->ep, &e->av->fid, 0)) ||
	    (rc = fi_enable(e->ep)))
		die("endpoint setup", rc);
}

/* Wait for one completion; returns its context. */
static void *cq_wait(ep_t *e)
{
	struct fi_cq_entry ev;
	for (;;) {
		ssize_t n = fi_cq_read(e->cq, &ev, 1);
		if (n == 1)
			return ev.op_context;
		if (n == -FI_EAVAIL) {
			struct fi_cq_err_entry err = {0};
			fi_cq_readerr(e->cq, &err, 0);
			die("completion", -err.err);
		}
		if (n != -FI_EAGAIN)
			die("fi_cq_read", (int)n);
	}
}

/* Post until accepted (the provider's queue may be full for a while). */
#define POST(call, e)                                                          \
	do {                                                                   \
		ssize_t rc_;                                                   \
		while ((rc_ = (call)) == -FI_EAGAIN)                           \
			fi_cq_read((e)->cq, NULL, 0);                          \
		if (rc_)                                                       \
			die(#call, (int)rc_);                                  \
	} while (0)

int main(int argc, char **argv)
{
	const char *prov = "tcp", *port = NULL, *host = NULL;
	size_t size = 1 << 20;
	long count = 1000;
	int window = 16, server = 0;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(a, "-p") && v)
			prov = argv[++i];
		else if (!strcmp(a, "-B") && v)
			port = argv[++i], server = 1;
		else if (!strcmp(a, "-P") && v)
			port = argv[++i];
		else if (!strcmp(a, "-s") && v)
			size = strtoull(argv[++i], NULL, 0);
		else if (!strcmp(a, "-n") && v)
			count = strtol(argv[++i], NULL, 0);
		else if (!strcmp(a, "-w") && v)
			window = atoi(argv[++i]);
		else if (a[0] != '-' && !host)
			host = a;
		else {
			fprintf(stderr, "usage: see the top of fi_stream.c\n");
			return 2;
		}
	}
	if (!port || (!server && !host) || count < 1 || window < 1 ||
	    window > MAX_WINDOW || size < 1) {
		fprintf(stderr, "fi_stream: bad arguments\n");
		return 2;
	}

	ep_t e;
	ep_open(&e, prov);
	char addr[256], peer[256];
	size_t alen = sizeof(addr);
	int rc = fi_getname(&e.ep->fid, addr, &alen);
	if (rc)
		die("fi_getname", rc);
	int s = oob_connect(server ? NULL : host, port);
	uint32_t l = (uint32_t)alen, pl;
	xfer(s, &l, sizeof(l), 1);
	xfer(s, addr, alen, 1);
	xfer(s, &pl, sizeof(pl), 0);
	if (pl > sizeof(peer))
		die("peer address too long", 0);
	xfer(s, peer, pl, 0);
	fi_addr_t dest;
	if (fi_av_insert(e.av, peer, 1, &dest, 0, NULL) != 1)
		die("fi_av_insert", 0);

	char *buf = malloc(size * (size_t)window);
	char ack = 0;
	struct fi_context ctx[MAX_WINDOW + 1];
	if (!buf)
		die("malloc", 0);
	memset(buf, 0x5a, size * (size_t)window);

	if (server) {
		for (int i = 0; i < window && i < count; i++)
			POST(fi_recv(e.ep, buf + (size_t)i * size, size, NULL,
				     FI_ADDR_UNSPEC, &ctx[i]),
			     &e);
		long posted = window < count ? window : count;
		for (long got = 0; got < count; got++) {
			struct fi_context *c = cq_wait(&e);
			int i = (int)(c - ctx);
			if (posted < count) {
				POST(fi_recv(e.ep, buf + (size_t)i * size, size,
					     NULL, FI_ADDR_UNSPEC, &ctx[i]),
				     &e);
				posted++;
			}
		}
		POST(fi_send(e.ep, &ack, 1, NULL, dest, &ctx[MAX_WINDOW]), &e);
		cq_wait(&e);
		/* The sender got the ack once it says so (then we may close). */
		xfer(s, &ack, 1, 0);
	} else {
		/* The receiver posts its buffers before we start the clock. */
		POST(fi_recv(e.ep, &ack, 1, NULL, FI_ADDR_UNSPEC,
			     &ctx[MAX_WINDOW]),
		     &e);
		usleep(100000);
		double t0 = now_s();
		long sent = 0, done = 0;
		for (; sent < window && sent < count; sent++)
			POST(fi_send(e.ep, buf + (size_t)sent * size, size,
				     NULL, dest, &ctx[sent]),
			     &e);
		int acked = 0;
		while (done < count || !acked) {
			struct fi_context *c = cq_wait(&e);
			if (c == &ctx[MAX_WINDOW]) {
				acked = 1;
				continue;
			}
			done++;
			int i = (int)(c - ctx);
			if (sent < count) {
				POST(fi_send(e.ep, buf + (size_t)i * size, size,
					     NULL, dest, &ctx[i]),
				     &e);
				sent++;
			}
		}
		double t = now_s() - t0;
		printf("%zu,%ld,%.6f,%.1f\n", size, count, t,
		       (double)size * (double)count / t / 1e6);
		xfer(s, &ack, 1, 1);
	}
	close(s);
	fi_close(&e.ep->fid);
	fi_close(&e.av->fid);
	fi_close(&e.cq->fid);
	fi_close(&e.domain->fid);
	fi_close(&e.fabric->fid);
	fi_freeinfo(e.fi);
	free(buf);
	return 0;
}
