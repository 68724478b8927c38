/*
 * ctl_test -- unit tests of the control protocol: frame encoding, the
 * bounds every reader enforces, the job key and the challenge-response
 * between two connections (right key, wrong key, garbage, oversized),
 * the REFUSED answer and the TICKET, and the strangers' budget (admit.c).
 */
#include "harness.h"

#include "naming/naming_priv.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

static void test_encoding(void)
{
	pcori_wbuf_t w = {0};
	pcori_frame_begin(&w, PCORI_CTL_HELLO);
	pcori_w_u8(&w, 0xab);
	pcori_w_u16(&w, 0x1234);
	pcori_w_u32(&w, 0xdeadbeef);
	pcori_w_str(&w, "name/1");
	CHECK(pcori_frame_end(&w));
	/* header: length, version, type, zero; all big-endian */
	CHECK(w.len == PCORI_CTL_HDR + 1 + 2 + 4 + 2 + 6);
	CHECK(w.p[0] == 0 && w.p[1] == 0 && w.p[2] == 0 &&
	      w.p[3] == w.len - PCORI_CTL_HDR);
	CHECK(w.p[4] == PCORI_CTL_VERSION && w.p[5] == PCORI_CTL_HELLO);
	CHECK(w.p[9] == 0x12 && w.p[10] == 0x34 && w.p[11] == 0xde);

	pcori_rbuf_t r;
	pcori_rbuf_init(&r, w.p + PCORI_CTL_HDR, w.len - PCORI_CTL_HDR);
	CHECK(pcori_r_u8(&r) == 0xab);
	CHECK(pcori_r_u16(&r) == 0x1234);
	CHECK(pcori_r_u32(&r) == 0xdeadbeef);
	char s[16];
	pcori_r_str(&r, s, sizeof(s));
	CHECK(!strcmp(s, "name/1") && pcori_r_done(&r));

	/* Reading past the end latches an error and yields zeros. */
	CHECK(pcori_r_u32(&r) == 0 && r.err);
	/* A string longer than the caller's buffer is an error. */
	pcori_rbuf_init(&r, w.p + PCORI_CTL_HDR + 7, 8);
	char tiny[4];
	pcori_r_str(&r, tiny, sizeof(tiny));
	CHECK(r.err && tiny[0] == '\0');
	/* A string with an embedded NUL is an error. */
	const uint8_t nul[] = {0, 3, 'a', 0, 'b'};
	pcori_rbuf_init(&r, nul, sizeof(nul));
	pcori_r_str(&r, s, sizeof(s));
	CHECK(r.err);
	pcori_wbuf_free(&w);

	/* Member entries round-trip; a port count past the limit does not. */
	pcori_member_t m = {.pid = 42, .state = PCORI_MEMBER_ALIVE,
			    .nports = 2};
	strcpy(m.host, "h/net:1");
	strcpy(m.ports[1].network, "tcp;ofi_rxm/10.0.0.0/24");
	m.ports[1].addrlen = 3;
	memcpy(m.ports[1].addr, "xyz", 3);
	pcori_w_member(&w, &m);
	pcori_member_t back;
	pcori_rbuf_init(&r, w.p, w.len);
	pcori_r_member(&r, &back);
	CHECK(pcori_r_done(&r));
	CHECK(back.pid == 42 && back.nports == 2 && back.ports[1].addrlen == 3);
	CHECK(!memcmp(back.ports[1].addr, "xyz", 3));
	CHECK(!strcmp(back.ports[1].network, m.ports[1].network));
	size_t nports_at = 4 + 1 + 2 + strlen(m.host);
	w.p[nports_at] = PCORI_MAX_PORTS + 1;
	pcori_rbuf_init(&r, w.p, w.len);
	pcori_r_member(&r, &back);
	CHECK(r.err);
	pcori_wbuf_free(&w);

	/* A process's name round-trips; one cut short latches an error. */
	pcori_os_proc_t me, got;
	pcori_os_proc_self(&me);
	CHECK(me.ospid == (int32_t)getpid());
	pcori_w_os_proc(&w, &me);
	CHECK(w.len == 44);
	pcori_rbuf_init(&r, w.p, w.len);
	pcori_r_os_proc(&r, &got);
	CHECK(pcori_r_done(&r) && !memcmp(me.boot, got.boot, sizeof(me.boot)));
	CHECK(got.pidns == me.pidns && got.netns == me.netns &&
	      got.start == me.start &&
	      got.ospid == me.ospid);
	pcori_rbuf_init(&r, w.p, w.len - 1);
	pcori_r_os_proc(&r, &got);
	CHECK(r.err);
	/* A process id past INT32_MAX is read as unknown. */
	memset(w.p + 40, 0xff, 4);
	pcori_rbuf_init(&r, w.p, w.len);
	pcori_r_os_proc(&r, &got);
	CHECK(pcori_r_done(&r) && got.ospid == 0);
	pcori_wbuf_free(&w);
}

static void test_key(void)
{
	CHECK_OK(pcori_crypto_init());
	uint8_t k1[PCORI_KEY_BYTES], k2[PCORI_KEY_BYTES];
	pcori_key_random(k1);
	pcori_key_random(k2);
	CHECK(memcmp(k1, k2, sizeof(k1)) != 0);
	char hex[2 * PCORI_KEY_BYTES + 1];
	pcori_key_to_hex(k1, hex);
	CHECK(strlen(hex) == 64);
	CHECK(pcori_key_from_hex(hex, k2) == 0 && !memcmp(k1, k2, sizeof(k1)));
	CHECK(pcori_key_from_hex("abc", k2) == -1);
	hex[10] = 'z';
	CHECK(pcori_key_from_hex(hex, k2) == -1);
	CHECK(pcori_key_check(k1) == pcori_key_check(k1));
	pcori_key_random(k2);
	CHECK(pcori_key_check(k1) != pcori_key_check(k2));
}

static int got_type;
static int on_frame(pcori_conn_t *c, int type, pcori_rbuf_t *r, void *ctx)
{
	(void)c;
	(void)r;
	(void)ctx;
	got_type = type;
	return PCOR_OK;
}

/* Pump both ends until neither moves; returns the first error seen. */
static int pump(pcori_conn_t *a, pcori_conn_t *b, int *rc_a, int *rc_b)
{
	*rc_a = *rc_b = PCOR_OK;
	for (int i = 0; i < 20; i++) {
		bool opened;
		if (!*rc_a)
			*rc_a = pcori_conn_flush(a);
		if (!*rc_b)
			*rc_b = pcori_conn_flush(b);
		if (!*rc_a)
			*rc_a = pcori_conn_input(a, on_frame, NULL, &opened);
		if (!*rc_b)
			*rc_b = pcori_conn_input(b, on_frame, NULL, &opened);
	}
	return *rc_a ? *rc_a : *rc_b;
}

static void pair(const uint8_t *kc, const uint8_t *ks, pcori_conn_t **c,
		 pcori_conn_t **s)
{
	int sv[2];
	CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) == 0);
	*c = pcori_conn_new(sv[0], false, false, kc, 1000000000ull);
	*s = pcori_conn_new(sv[1], true, false, ks, 1000000000ull);
	CHECK(*c && *s);
}

static void test_handshake(void)
{
	uint8_t key[PCORI_KEY_BYTES], other[PCORI_KEY_BYTES];
	pcori_key_random(key);
	pcori_key_random(other);
	pcori_conn_t *c, *s;
	int rc_c, rc_s;

	/* the right key: both sides open, then frames flow */
	pair(key, key, &c, &s);
	CHECK_OK(pump(c, s, &rc_c, &rc_s));
	CHECK(c->state == PCORI_CONN_OPEN && s->state == PCORI_CONN_OPEN);
	pcori_wbuf_t w = {0};
	pcori_frame_begin(&w, PCORI_CTL_READY);
	CHECK(pcori_frame_end(&w));
	CHECK_OK(pcori_conn_send(c, &w));
	pcori_wbuf_free(&w);
	got_type = 0;
	CHECK_OK(pump(c, s, &rc_c, &rc_s));
	CHECK(got_type == PCORI_CTL_READY);
	pcori_conn_free(c);
	pcori_conn_free(s);

	/* a wrong key: the server refuses, nothing reaches the handler */
	pair(other, key, &c, &s);
	got_type = 0;
	pump(c, s, &rc_c, &rc_s);
	CHECK_RC(rc_s, PCOR_ERR_AUTH);
	CHECK(s->state != PCORI_CONN_OPEN && got_type == 0);
	/* ... and says so, with its key id: the client knows it was AUTH */
	CHECK_RC(rc_c, PCOR_ERR_AUTH);
	CHECK(c->refused && c->refused_key_id == pcori_key_check(key));
	pcori_conn_free(c);
	pcori_conn_free(s);

	/* a server with the wrong key cannot fool the client either */
	pair(key, other, &c, &s);
	pump(c, s, &rc_c, &rc_s);
	CHECK_RC(rc_s, PCOR_ERR_AUTH);
	pcori_conn_free(c);
	pcori_conn_free(s);

	/* a ticket with the key marks a member before the challenge... */
	pair(key, key, &c, &s);
	CHECK_OK(pcori_conn_ticket(c));
	CHECK_OK(pcori_conn_flush(c));
	bool op;
	CHECK_OK(pcori_conn_input(s, on_frame, NULL, &op));
	CHECK(s->ticket_ok && !op);
	CHECK_OK(pump(c, s, &rc_c, &rc_s));
	CHECK(c->state == PCORI_CONN_OPEN && s->state == PCORI_CONN_OPEN);
	pcori_conn_free(c);
	pcori_conn_free(s);
	/* ... one made with another key is refused at once */
	pair(other, key, &c, &s);
	CHECK_OK(pcori_conn_ticket(c));
	CHECK_OK(pcori_conn_flush(c));
	CHECK_RC(pcori_conn_input(s, on_frame, NULL, &op), PCOR_ERR_AUTH);
	CHECK(!s->ticket_ok);
	pcori_conn_free(c);
	pcori_conn_free(s);

	/* garbage, a wrong version, an oversized frame, a frame too early */
	const uint8_t bad[][8] = {
		{'G', 'E', 'T', ' ', '/', ' ', 'H', 'T'},
		{0, 0, 0, 0, 9, PCORI_CTL_AUTH, 0, 0},
		{0, 0, 1, 0, PCORI_CTL_VERSION, PCORI_CTL_AUTH, 0, 0},
		{0, 0, 0, 0, PCORI_CTL_VERSION, PCORI_CTL_PUB, 0, 0},
	};
	for (size_t i = 0; i < PCORI_ARRAY_LEN(bad); i++) {
		int sv[2];
		CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0,
				 sv) == 0);
		s = pcori_conn_new(sv[1], true, false, key, 1000000000ull);
		CHECK(write(sv[0], bad[i], 8) == 8);
		bool opened;
		CHECK_RC(pcori_conn_input(s, on_frame, NULL, &opened),
			 PCOR_ERR_PROTO);
		pcori_conn_free(s);
		close(sv[0]);
	}
}

/* An accepted connection from source address 127.0.0.<host>. */
static pcori_conn_t *stranger(int lfd, const struct sockaddr_in *to, int host,
			      int *client_fd)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	CHECK(fd >= 0);
	struct sockaddr_in src = {.sin_family = AF_INET};
	src.sin_addr.s_addr = htonl(0x7f000000u | (uint32_t)host);
	CHECK(bind(fd, (struct sockaddr *)&src, sizeof(src)) == 0);
	CHECK(connect(fd, (const struct sockaddr *)to, sizeof(*to)) == 0);
	int sfd = accept(lfd, NULL, NULL);
	CHECK(sfd >= 0);
	CHECK(fcntl(sfd, F_SETFL, O_NONBLOCK) == 0);
	static const uint8_t key[PCORI_KEY_BYTES];
	pcori_conn_t *c = pcori_conn_new(sfd, true, false, key, 1000000000ull);
	CHECK(c);
	*client_fd = fd;
	return c;
}

/*
 * The strangers' budget: a newcomer always gets in; past the per-address
 * budget that address's oldest is shed, past the total the oldest of all.
 */
static void test_admit(void)
{
	pcori_nm.unauth_per_addr = 2;
	pcori_nm.unauth_max = 5;
	pcori_admit_init();
	char addr[64];
	int lfd = pcori_sock_listen("127.0.0.1", "0", addr, sizeof(addr));
	CHECK(lfd >= 0);
	struct sockaddr_in to;
	CHECK(pcori_sock_parse(addr, &to) == 0);
	/* sources: .2 .2 .2 | .3 .3 | .4 .4 */
	static const int hosts[] = {2, 2, 2, 3, 3, 4, 4};
	enum { N = PCORI_ARRAY_LEN(hosts) };
	pcori_conn_t *c[N];
	int cfd[N];
	for (int i = 0; i < N; i++) {
		c[i] = stranger(lfd, &to, hosts[i], &cfd[i]);
		CHECK_OK(pcori_admit_add(c[i]));
	}
	/*
	 * #2 shed #0 (three from .2); #6 made six: the oldest left, #1, went.
	 */
	static const int want_dead[N] = {1, 1, 0, 0, 0, 0, 0};
	for (int i = 0; i < N; i++) {
		if ((c[i]->dead == PCOR_ERR_AGAIN) != want_dead[i])
			fprintf(stderr, "stranger %d: dead %d\n", i,
				c[i]->dead);
		CHECK((c[i]->dead == PCOR_ERR_AGAIN) == want_dead[i]);
		CHECK(c[i]->pooled == !want_dead[i]);
	}
	CHECK(pcori_admit_count() == 5);
	/* An authenticated one leaves the pool and is never shed. */
	pcori_admit_leave(c[3]);
	CHECK(pcori_admit_count() == 4);
	uint64_t ref[PCORI_REFUSE_NREASONS_];
	pcori_admit_stats(ref);
	CHECK(ref[PCORI_REFUSE_SHED] == 2);
	for (int i = 0; i < N; i++) {
		pcori_admit_leave(c[i]);
		pcori_conn_free(c[i]);
		close(cfd[i]);
	}
	CHECK(pcori_admit_count() == 0);
	pcori_admit_fini();
	close(lfd);
}

int main(void)
{
	test_encoding();
	test_key();
	test_handshake();
	test_admit();
	printf("ctl_test: ok\n");
	return 0;
}
