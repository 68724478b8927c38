/*
 * conn.c -- one control connection: non-blocking TCP, length-prefixed
 * frames, and the challenge-response that opens it.
 *
 * Design notes.  The server speaks first with a random nonce; the client
 * answers with its own nonce and HMAC(key, 'C' | server nonce | client
 * nonce); the server checks it and proves itself with HMAC(key, 'S' |
 * client nonce | server nonce).  Until then a frame may carry at most
 * PCORI_CTL_MAX_PREAUTH bytes and only the handshake types are accepted,
 * so a peer without the key can make us hold 64 bytes, nothing more, and
 * nothing it sends reaches the directory.  Any violation closes the
 * connection with a status the owner counts.  A client whose proof is
 * wrong is told so (REFUSED, with the server's key id) before the close,
 * so it can report PCOR_ERR_AUTH rather than "nobody answered".
 */
#include "naming_priv.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sodium.h>
#include <sys/socket.h>
#include <unistd.h>

pcori_conn_t *pcori_conn_new(int fd, bool server, bool connecting,
			     const uint8_t *key, uint64_t auth_timeout_ns)
{
	pcori_conn_t *c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->fd = fd;
	c->server = server;
	c->key = key;
	c->pid = -1;
	c->last_rx_ns = c->last_tx_ns = pcori_now_ns();
	c->auth_deadline_ns = c->last_rx_ns + auth_timeout_ns;
	pcori_list_init(&c->link);
	if (server) {
		randombytes_buf(c->nonce_mine, PCORI_NONCE_BYTES);
		pcori_wbuf_t w = {0};
		pcori_frame_begin(&w, PCORI_CTL_CHALLENGE);
		pcori_w_bytes(&w, c->nonce_mine, PCORI_NONCE_BYTES);
		if (!pcori_frame_end(&w) || pcori_conn_send(c, &w)) {
			pcori_wbuf_free(&w);
			free(c);
			return NULL;
		}
		pcori_wbuf_free(&w);
		c->state = PCORI_CONN_WAIT_AUTH;
	} else {
		c->state = connecting ? PCORI_CONN_CONNECTING
				      : PCORI_CONN_WAIT_CHALLENGE;
	}
	return c;
}

void pcori_conn_free(pcori_conn_t *c)
{
	if (!c)
		return;
	if (c->fd >= 0)
		close(c->fd);
	free(c->rx);
	pcori_wbuf_free(&c->tx);
	free(c);
}

int pcori_conn_send(pcori_conn_t *c, const pcori_wbuf_t *frame)
{
	/* Compact what was sent so the buffer does not grow forever. */
	if (c->txoff && c->txoff == c->tx.len) {
		c->tx.len = 0;
		c->txoff = 0;
	}
	pcori_w_bytes(&c->tx, frame->p, frame->len);
	c->last_tx_ns = pcori_now_ns();
	return c->tx.err ? PCOR_ERR_NOMEM : PCOR_OK;
}

int pcori_conn_flush(pcori_conn_t *c)
{
	if (c->state == PCORI_CONN_CONNECTING)
		return PCOR_OK;
	while (c->txoff < c->tx.len) {
		ssize_t n = send(c->fd, c->tx.p + c->txoff,
				 c->tx.len - c->txoff, MSG_NOSIGNAL);
		if (n > 0) {
			c->txoff += (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return PCOR_OK;
		return PCOR_ERR_PEER_LOST;
	}
	c->tx.len = 0;
	c->txoff = 0;
	return PCOR_OK;
}

int pcori_conn_connected(pcori_conn_t *c)
{
	int err = 0;
	socklen_t len = sizeof(err);
	if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0 || err)
		return PCOR_ERR_UNREACHABLE;
	c->state = PCORI_CONN_WAIT_CHALLENGE;
	return PCOR_OK;
}

static int send_frame(pcori_conn_t *c, int type, const void *a, size_t na,
		      const void *b, size_t nb)
{
	pcori_wbuf_t w = {0};
	pcori_frame_begin(&w, type);
	pcori_w_bytes(&w, a, na);
	if (b)
		pcori_w_bytes(&w, b, nb);
	int rc = pcori_frame_end(&w) ? pcori_conn_send(c, &w) : PCOR_ERR_NOMEM;
	pcori_wbuf_free(&w);
	return rc;
}

int pcori_conn_ticket(pcori_conn_t *c)
{
	uint8_t nonce[PCORI_NONCE_BYTES], mac[PCORI_MAC_BYTES];
	randombytes_buf(nonce, sizeof(nonce));
	pcori_mac(c->key, 'T', nonce, nonce, mac);
	return send_frame(c, PCORI_CTL_TICKET, nonce, sizeof(nonce), mac,
			  sizeof(mac));
}

/* Tell the client its key was refused (best effort: we close next). */
static int refuse(pcori_conn_t *c)
{
	uint8_t id[4];
	uint32_t k = pcori_key_check(c->key);
	for (int i = 0; i < 4; i++)
		id[i] = (uint8_t)(k >> (24 - 8 * i));
	if (!send_frame(c, PCORI_CTL_REFUSED, id, sizeof(id), NULL, 0))
		pcori_conn_flush(c);
	return PCOR_ERR_AUTH;
}

/* One handshake frame; PCOR_OK or why the connection must close. */
static int handshake(pcori_conn_t *c, int type, const uint8_t *b, size_t n,
		     bool *opened_p)
{
	uint8_t mac[PCORI_MAC_BYTES];
	if (!c->server && type == PCORI_CTL_REFUSED &&
	    (c->state == PCORI_CONN_WAIT_CHALLENGE ||
	     c->state == PCORI_CONN_WAIT_OK)) {
		if (n != 4)
			return PCOR_ERR_PROTO;
		c->refused = true;
		c->refused_key_id = (uint32_t)b[0] << 24 |
				    (uint32_t)b[1] << 16 |
				    (uint32_t)b[2] << 8 | b[3];
		return PCOR_ERR_AUTH;
	}
	if (c->server && type == PCORI_CTL_TICKET &&
	    c->state == PCORI_CONN_WAIT_AUTH && !c->ticket_ok) {
		if (n != PCORI_NONCE_BYTES + PCORI_MAC_BYTES)
			return PCOR_ERR_PROTO;
		pcori_mac(c->key, 'T', b, b, mac);
		if (sodium_memcmp(mac, b + PCORI_NONCE_BYTES, sizeof(mac)))
			return refuse(c);
		c->ticket_ok = true;
		return PCOR_OK;
	}
	switch (c->state) {
	case PCORI_CONN_WAIT_CHALLENGE:
		if (type != PCORI_CTL_CHALLENGE || n != PCORI_NONCE_BYTES)
			return PCOR_ERR_PROTO;
		memcpy(c->nonce_peer, b, PCORI_NONCE_BYTES);
		randombytes_buf(c->nonce_mine, PCORI_NONCE_BYTES);
		pcori_mac(c->key, 'C', c->nonce_peer, c->nonce_mine, mac);
		c->state = PCORI_CONN_WAIT_OK;
		return send_frame(c, PCORI_CTL_AUTH, c->nonce_mine,
				  PCORI_NONCE_BYTES, mac, sizeof(mac));
	case PCORI_CONN_WAIT_AUTH:
		if (type != PCORI_CTL_AUTH ||
		    n != PCORI_NONCE_BYTES + PCORI_MAC_BYTES)
			return PCOR_ERR_PROTO;
		memcpy(c->nonce_peer, b, PCORI_NONCE_BYTES);
		pcori_mac(c->key, 'C', c->nonce_mine, c->nonce_peer, mac);
		if (sodium_memcmp(mac, b + PCORI_NONCE_BYTES, sizeof(mac)))
			return refuse(c);
		pcori_mac(c->key, 'S', c->nonce_peer, c->nonce_mine, mac);
		c->state = PCORI_CONN_OPEN;
		*opened_p = true;
		return send_frame(c, PCORI_CTL_AUTH_OK, mac, sizeof(mac),
				  NULL, 0);
	case PCORI_CONN_WAIT_OK:
		if (type != PCORI_CTL_AUTH_OK || n != PCORI_MAC_BYTES)
			return PCOR_ERR_PROTO;
		pcori_mac(c->key, 'S', c->nonce_mine, c->nonce_peer, mac);
		if (sodium_memcmp(mac, b, sizeof(mac)))
			return PCOR_ERR_AUTH;
		c->state = PCORI_CONN_OPEN;
		*opened_p = true;
		return PCOR_OK;
	default:
		return PCOR_ERR_PROTO;
	}
}

/* Frame what is in rx; consume complete frames. */
static int parse(pcori_conn_t *c, pcori_frame_fn fn, void *ctx,
		 bool *opened_p)
{
	size_t off = 0;
	int rc = PCOR_OK;
	while (c->rxlen - off >= PCORI_CTL_HDR) {
		const uint8_t *h = c->rx + off;
		uint32_t len = (uint32_t)h[0] << 24 | (uint32_t)h[1] << 16 |
			       (uint32_t)h[2] << 8 | h[3];
		bool open = c->state == PCORI_CONN_OPEN;
		uint32_t max = open ? PCORI_CTL_MAX : PCORI_CTL_MAX_PREAUTH;
		if (h[4] != PCORI_CTL_VERSION || h[6] || h[7] || len > max ||
		    h[5] == 0 || h[5] >= PCORI_CTL_TYPE_MAX_) {
			rc = PCOR_ERR_PROTO;
			break;
		}
		if (c->rxlen - off - PCORI_CTL_HDR < len)
			break;
		const uint8_t *body = h + PCORI_CTL_HDR;
		off += PCORI_CTL_HDR + len;
		if (!open) {
			rc = handshake(c, h[5], body, len, opened_p);
		} else if (h[5] <= PCORI_CTL_AUTH_OK) {
			rc = PCOR_ERR_PROTO;
		} else {
			pcori_rbuf_t r;
			pcori_rbuf_init(&r, body, len);
			rc = fn(c, h[5], &r, ctx);
		}
		if (rc)
			break;
	}
	memmove(c->rx, c->rx + off, c->rxlen - off);
	c->rxlen -= off;
	return rc;
}

int pcori_conn_input(pcori_conn_t *c, pcori_frame_fn fn, void *ctx,
		     bool *opened_p)
{
	*opened_p = false;
	if (c->state == PCORI_CONN_CONNECTING) {
		int rc = pcori_conn_connected(c);
		if (rc)
			return rc;
	}
	for (;;) {
		/* Room for a header plus the largest body now allowed. */
		size_t max = PCORI_CTL_HDR + (c->state == PCORI_CONN_OPEN
						      ? PCORI_CTL_MAX
						      : PCORI_CTL_MAX_PREAUTH);
		if (c->rxcap - c->rxlen < 4096 && c->rxcap < max) {
			size_t cap = c->rxcap ? c->rxcap * 2 : 4096;
			cap = PCORI_MIN(cap, max);
			uint8_t *p = realloc(c->rx, cap);
			if (!p)
				return PCOR_ERR_NOMEM;
			c->rx = p;
			c->rxcap = cap;
		}
		if (c->rxlen == c->rxcap)
			return PCOR_ERR_PROTO; /* a frame larger than allowed */
		ssize_t n = recv(c->fd, c->rx + c->rxlen, c->rxcap - c->rxlen,
				 0);
		if (n == 0)
			return PCOR_ERR_PEER_LOST;
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return PCOR_OK;
			return PCOR_ERR_PEER_LOST;
		}
		c->rxlen += (size_t)n;
		c->last_rx_ns = pcori_now_ns();
		int rc = parse(c, fn, ctx, opened_p);
		if (rc)
			return rc;
	}
}

/* ------------------------------------------------------------ sockets */

int pcori_sock_parse(const char *hostport, void *sin_out)
{
	struct sockaddr_in *sin = sin_out;
	char buf[PCORI_AGENT_ADDR_MAX];
	if (!hostport || strlen(hostport) >= sizeof(buf))
		return -1;
	strcpy(buf, hostport);
	char *colon = strrchr(buf, ':');
	if (!colon)
		return -1;
	*colon = '\0';
	char *end;
	long port = strtol(colon + 1, &end, 10);
	if (*end || port <= 0 || port > 65535)
		return -1;
	memset(sin, 0, sizeof(*sin));
	sin->sin_family = AF_INET;
	sin->sin_port = htons((uint16_t)port);
	if (inet_pton(AF_INET, buf, &sin->sin_addr) != 1)
		return -1;
	return 0;
}

static int user_timeout_ms;

void pcori_sock_set_user_timeout(int64_t ms)
{
	user_timeout_ms = ms > 0 && ms < INT_MAX ? (int)ms : 0;
}

void pcori_sock_tune(int fd)
{
	int one = 1;
	/*
	 * Data unacknowledged this long fails the connection: a host that
	 * vanished mid-send is noticed within the peer timeout (heartbeats
	 * keep data flowing when idle).
	 */
	if (user_timeout_ms)
		setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout_ms,
			   sizeof(user_timeout_ms));
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	/* A host that vanishes (no FIN, no RST) is noticed in ~10 s. */
	setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
	int idle = 5, intvl = 1, cnt = 5;
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
}

void pcori_sock_peer(int fd, char *out, size_t len)
{
	struct sockaddr_in sin;
	socklen_t sl = sizeof(sin);
	char ip[INET_ADDRSTRLEN];
	if (getpeername(fd, (struct sockaddr *)&sin, &sl) < 0 ||
	    sin.sin_family != AF_INET ||
	    !inet_ntop(AF_INET, &sin.sin_addr, ip, sizeof(ip))) {
		snprintf(out, len, "?");
		return;
	}
	snprintf(out, len, "%s:%u", ip, ntohs(sin.sin_port));
}

int pcori_sock_connect(const void *sin)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
			0);
	if (fd < 0)
		return -errno;
	pcori_sock_tune(fd);
	if (connect(fd, sin, sizeof(struct sockaddr_in)) < 0 &&
	    errno != EINPROGRESS) {
		int e = errno;
		close(fd);
		return -e;
	}
	return fd;
}

/* Bind a listener on ip, on a port of the range "lo-hi" (or "0"). */
int pcori_sock_listen(const char *ip, const char *ports, char *addr_out,
		      size_t addr_len)
{
	long lo = 0, hi = 0;
	char *end;
	lo = strtol(ports, &end, 10);
	if (*end == '-')
		hi = strtol(end + 1, &end, 10);
	else
		hi = lo;
	if (*end || lo < 0 || hi > 65535 || hi < lo)
		return PCOR_ERR_INVAL;
	struct sockaddr_in sin = {.sin_family = AF_INET};
	if (inet_pton(AF_INET, ip, &sin.sin_addr) != 1)
		return PCOR_ERR_INVAL;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
			0);
	if (fd < 0)
		return PCOR_ERR_SYSTEM;
	/* Start at a random port of the range so parallel jobs spread out. */
	long span = hi - lo + 1;
	long start = lo ? (long)randombytes_uniform((uint32_t)span) : 0;
	int bound = -1;
	for (long i = 0; i < span; i++) {
		long port = lo ? lo + (start + i) % span : 0;
		sin.sin_port = htons((uint16_t)port);
		if (bind(fd, (struct sockaddr *)&sin, sizeof(sin)) == 0) {
			bound = 0;
			break;
		}
		if (errno != EADDRINUSE && errno != EACCES)
			break;
	}
	if (bound || listen(fd, SOMAXCONN) < 0) {
		close(fd);
		return PCOR_ERR_UNREACHABLE;
	}
	socklen_t sl = sizeof(sin);
	getsockname(fd, (struct sockaddr *)&sin, &sl);
	char ipbuf[INET_ADDRSTRLEN];
	inet_ntop(AF_INET, &sin.sin_addr, ipbuf, sizeof(ipbuf));
	snprintf(addr_out, addr_len, "%s:%u", ipbuf, ntohs(sin.sin_port));
	return fd;
}

static int frame_ignore(pcori_conn_t *c, int type, pcori_rbuf_t *body,
			void *ctx)
{
	(void)c;
	(void)type;
	(void)body;
	(void)ctx;
	return PCOR_ERR_PROTO; /* nothing may come before we speak */
}

int pcori_conn_open_sync(pcori_conn_t *c, uint64_t deadline_ns)
{
	while (c->state != PCORI_CONN_OPEN) {
		uint64_t now = pcori_now_ns();
		if (now >= deadline_ns)
			return PCOR_ERR_TIMEDOUT;
		struct pollfd p = {.fd = c->fd, .events = POLLIN};
		if (pcori_conn_wants_write(c))
			p.events |= POLLOUT;
		int ms = (int)PCORI_MIN((deadline_ns - now) / 1000000 + 1,
					1000);
		if (poll(&p, 1, ms) < 0 && errno != EINTR)
			return PCOR_ERR_SYSTEM;
		if (!p.revents)
			continue;
		bool opened;
		int rc = pcori_conn_input(c, frame_ignore, NULL, &opened);
		if (!rc)
			rc = pcori_conn_flush(c);
		if (rc)
			return rc;
	}
	return PCOR_OK;
}

int pcori_conn_flush_sync(pcori_conn_t *c, uint64_t deadline_ns)
{
	while (c->txoff < c->tx.len) {
		int rc = pcori_conn_flush(c);
		if (rc)
			return rc;
		if (c->txoff >= c->tx.len)
			break;
		uint64_t now = pcori_now_ns();
		if (now >= deadline_ns)
			return PCOR_ERR_TIMEDOUT;
		struct pollfd p = {.fd = c->fd, .events = POLLOUT};
		poll(&p, 1, (int)((deadline_ns - now) / 1000000 + 1));
	}
	return PCOR_OK;
}
