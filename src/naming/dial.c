/*
 * dial.c -- connecting to other agents, and what a failed connect means.
 *
 * Design notes.  A connect that fails, or a connection closed before its
 * handshake completed, proves little: the peer's listener may have shed
 * us under a flood of strangers (admit.c), a SYN may have been lost, the
 * peer may be slow.  So a failure only makes the peer a suspect.  We
 * dial again with doubling back-off (PCORI_REDIAL_MIN_MS up to
 * PCORI_REDIAL_MAX_MS) and tell nobody.  Once the suspicion is
 * PCOR_PEER_TIMEOUT_MS old we ask another witness: the launcher, which
 * knows whether the process is still running.
 *   - launcher says it ended: the peer is lost (the failure event).
 *   - launcher says it runs: it is alive but unreachable from here; we
 *     keep trying and say so, but never report a live process as lost.
 *   - no launcher (PMIx, or its connection is gone): the only witness
 *     left is the kernel, which refused every attempt for the whole
 *     timeout: the peer is lost.
 *
 * Liveness of connected peers.  The kernel reports a killed process at
 * once (its sockets close), but not a stopped or hung one, nor a host
 * whose link went down.  So every agent pings a peer it has sent nothing
 * to for a quarter of PCOR_PEER_TIMEOUT_MS, and a peer from which nothing
 * at all arrived for the whole timeout is declared lost; TCP_USER_TIMEOUT
 * fails a connection whose data stays unacknowledged as long.  A peer
 * declared lost for its silence is told so (FENCED) before the close: if
 * it was only stopped and resumes, it learns it is out, says so, and
 * every peer refuses it (a lost pid is never taken back).
 *
 * Silence alone cannot tell a hung process from a starved one: on a host
 * with a few hundred runnable threads per core, an agent thread can wait
 * over a second for a CPU, or for a lock whose holder was preempted,
 * while the rest of its process runs.  For a peer on this host the
 * kernel is a second witness, whatever fabric carries its data: its HELLO
 * names its process (pcori_os_proc_t), and one that is not stopped and
 * whose threads keep using CPU is starved, and its verdict waits
 * (starved()).  A stopped process is fenced as before; a hung one, whose
 * CPU time hardly grows over a whole timeout, a timeout later.
 *
 * That verdict is the job's, not one member's: the others may have timed
 * the same silence a moment later (and, the process resumed meanwhile,
 * hear it again), or have no open connection to it at all (its
 * handshake was under way when it stopped; a launcher asked about a
 * stopped process says it runs).  So whoever fences a peer for silence
 * tells every other member (SILENT), and each fences it too: the fenced
 * process, which takes everyone for lost once told, and the rest agree.
 * Runs on the agent thread.
 */
#include "naming_priv.h"

#include <netinet/in.h>
#include <sodium.h>
#include <unistd.h>

#define NM pcori_nm

#define PCORI_REDIAL_MIN_MS 10
#define PCORI_REDIAL_MAX_MS 500

static uint64_t ms_ns(int64_t ms)
{
	return (uint64_t)ms * 1000000ull;
}

/* Fault injection (PCOR_FAULT_CONNECT_*): should this attempt fail? */
static bool fault(int pid)
{
	if (pid == NM.fault_connect_to)
		return true;
	return NM.fault_connect_pct > 0 &&
	       randombytes_uniform(100) < (uint32_t)NM.fault_connect_pct;
}

void pcori_dial(pcori_view_t *e)
{
	struct sockaddr_in sin;
	e->dialed = true;
	e->redial_ns = 0;
	if (fault(e->pid)) {
		pcori_dial_failed(e, PCOR_ERR_UNREACHABLE, 0);
		return;
	}
	int fd = -1;
	if (pcori_sock_parse(e->agent, &sin) == 0)
		fd = pcori_sock_connect(&sin);
	pcori_conn_t *c = fd >= 0 ? pcori_conn_new(fd, false, true,
						   NM.boot.key,
						   ms_ns(NM.auth_timeout_ms))
				  : NULL;
	/* The ticket goes out with the first bytes: see admit.c. */
	if (c && pcori_conn_ticket(c)) {
		pcori_conn_free(c);
		c = NULL;
		fd = -1;
	}
	if (!c) {
		if (fd >= 0)
			close(fd);
		pcori_dial_failed(e, PCOR_ERR_UNREACHABLE, 0);
		return;
	}
	c->pid = e->pid;
	pcori_agent_add_conn(c, true);
}

void pcori_dial_failed(pcori_view_t *e, int rc, uint32_t refused_key_id)
{
	uint64_t now = pcori_now_ns();
	if (rc == PCOR_ERR_AUTH)
		PCORI_ERROR(PCORI_SUB_NAMING,
			    "agent: process %d at %s refused our job key (key "
			    "id %08x, its %08x)",
			    e->pid, e->agent, pcori_key_check(NM.boot.key),
			    refused_key_id);
	if (!e->suspect_ns) {
		e->suspect_ns = now;
		e->nfail = 0;
		PCORI_INFO(PCORI_SUB_NAMING,
			   "agent: cannot reach process %d at %s (%s); "
			   "suspecting it, retrying",
			   e->pid, e->agent, pcor_strerror(rc));
	}
	e->nfail++;
	int shift = PCORI_MIN(e->nfail - 1, 10);
	int64_t wait = PCORI_MIN((int64_t)PCORI_REDIAL_MIN_MS << shift,
				 (int64_t)PCORI_REDIAL_MAX_MS);
	e->redial_ns = now + ms_ns(wait);
}

void pcori_dial_ok(pcori_view_t *e)
{
	if (e->suspect_ns)
		PCORI_INFO(PCORI_SUB_NAMING,
			   "agent: process %d reached after %d failed "
			   "attempts: suspicion cleared",
			   e->pid, e->nfail);
	e->suspect_ns = 0;
	e->redial_ns = 0;
	e->nfail = 0;
	e->probing = false;
}

/*
 * Who can say whether e's process still runs: the launcher, or else (a
 * job started by PMIx has none) another member whose connection is open,
 * a witness that may still hear it over another path.
 */
static pcori_conn_t *prober_for(const pcori_view_t *e)
{
	if (NM.seed)
		return NM.seed;
	pcori_list_t *pos;
	pcori_list_foreach(pos, &NM.conns)
	{
		pcori_conn_t *c = PCORI_CONTAINER_OF(pos, pcori_conn_t, link);
		if (!c->dead && c->state == PCORI_CONN_OPEN && c->pid >= 0 &&
		    c->pid != e->pid && pcori_agent_is_peer(c))
			return c;
	}
	return NULL;
}

/* Ask whether pid still runs; the answer comes to
 * pcori_dial_probe_reply.  False when there is nobody to ask. */
static bool probe(pcori_view_t *e)
{
	if (e->probing)
		return true;
	pcori_conn_t *c = prober_for(e);
	if (!c)
		return false;
	pcori_wbuf_t w = {0};
	pcori_frame_begin(&w, PCORI_CTL_PROBE);
	pcori_w_u32(&w, PCORI_REQID_PROBE | (uint32_t)e->pid);
	pcori_w_u32(&w, (uint32_t)e->pid);
	bool ok = pcori_frame_end(&w);
	if (ok)
		pcori_agent_push(c, &w);
	pcori_wbuf_free(&w);
	e->probing = ok;
	e->probe_ns = pcori_now_ns();
	if (ok && c != NM.seed)
		PCORI_INFO(PCORI_SUB_NAMING,
			   "agent: asking process %d whether it still hears "
			   "process %d",
			   c->pid, e->pid);
	else if (ok)
		PCORI_INFO(PCORI_SUB_NAMING,
			   "agent: asking the launcher whether process %d "
			   "still runs",
			   e->pid);
	return ok;
}

/*
 * A member asks whether we still hear pid: yes while our connection to
 * it is open and heard within the peer timeout.
 */
int pcori_dial_probe_request(pcori_conn_t *c, pcori_rbuf_t *r)
{
	uint32_t reqid = pcori_r_u32(r);
	uint32_t pid = pcori_r_u32(r);
	if (!pcori_r_done(r) ||
	    (reqid & (PCORI_REQID_REG | PCORI_REQID_PROBE)) != PCORI_REQID_PROBE)
		return PCOR_ERR_PROTO;
	const pcori_view_t *e =
		pid <= INT32_MAX ? pcori_agent_view((int)pid) : NULL;
	uint64_t now = pcori_now_ns();
	int st = PCOR_ERR_NOPEER;
	if (e && !pcori_agent_view_live(e))
		st = PCOR_ERR_PEER_LOST;
	else if (e && e->conn && !e->conn->dead &&
		 now - e->conn->last_rx_ns < ms_ns(NM.peer_timeout_ms))
		st = PCOR_OK;
	else if (e)
		st = PCOR_ERR_UNREACHABLE;
	pcori_agent_reply(c->pid, reqid, st, NULL);
	return PCOR_OK;
}

void pcori_dial_probe_reply(int pid, int status)
{
	pcori_view_t *e = pcori_agent_view(pid);
	if (!e || !e->probing)
		return;
	e->probing = false;
	if (!e->suspect_ns || e->conn)
		return; /* reached meanwhile */
	if (status == PCOR_OK) {
		PCORI_WARN(PCORI_SUB_NAMING,
			   "agent: process %d runs (says the %s) but "
			   "cannot be reached at %s after %d attempts; still "
			   "trying",
			   pid, NM.seed ? "launcher" : "witness", e->agent,
			   e->nfail);
		/* Ask again after another timeout. */
		e->suspect_ns = pcori_now_ns();
		return;
	}
	PCORI_WARN(PCORI_SUB_NAMING,
		   "agent: process %d is gone (%s: %s; %d attempts to "
		   "reach %s failed)",
		   pid, NM.seed ? "launcher" : "witness", pcor_strerror(status),
		   e->nfail, e->agent);
	pcori_agent_member_gone(e, false);
}

uint64_t pcori_dial_expire(uint64_t now)
{
	uint64_t next = UINT64_MAX;
	pcori_view_t *e, *t;
	/* The view is only added to on this thread: iterating is safe. */
	HASH_ITER(hh, NM.view, e, t)
	{
		if (!e->suspect_ns || e->conn || !pcori_agent_view_live(e))
			continue;
		uint64_t confirm = e->suspect_ns + ms_ns(NM.peer_timeout_ms);
		/* A witness that left or hangs does not answer: stop waiting. */
		if (e->probing && now > e->probe_ns &&
		    now - e->probe_ns >= ms_ns(NM.peer_timeout_ms)) {
			e->probing = false;
			PCORI_WARN(PCORI_SUB_NAMING,
				   "agent: process %d unreachable at %s and "
				   "nobody answered for it: declaring it lost",
				   e->pid, e->agent);
			pcori_agent_member_gone(e, false);
			continue;
		}
		if (now >= confirm && !e->probing) {
			if (!probe(e)) {
				PCORI_WARN(PCORI_SUB_NAMING,
					   "agent: process %d unreachable at "
					   "%s for %lld ms (%d attempts): "
					   "declaring it lost",
					   e->pid, e->agent,
					   (long long)NM.peer_timeout_ms,
					   e->nfail);
				pcori_agent_member_gone(e, false);
				continue;
			}
		}
		if (e->redial_ns && now >= e->redial_ns) {
			pcori_dial(e);
			if (e->conn || !pcori_agent_view_live(e))
				continue;
		}
		if (e->redial_ns)
			next = PCORI_MIN(next, e->redial_ns);
		if (!e->probing)
			next = PCORI_MIN(next, confirm);
		else
			next = PCORI_MIN(next, e->probe_ns +
						       ms_ns(NM.peer_timeout_ms));
	}
	return next;
}

/* Tell c's process it is out, and close c. */
static void fence(pcori_conn_t *c, uint64_t ms)
{
	pcori_wbuf_t w = {0};
	pcori_frame_begin(&w, PCORI_CTL_FENCED);
	pcori_w_u32(&w, (uint32_t)PCORI_MIN(ms, UINT32_MAX));
	if (pcori_frame_end(&w)) {
		/* Queued in the kernel for when it resumes. */
		pcori_conn_send(c, &w);
		pcori_conn_flush(c);
	}
	pcori_wbuf_free(&w);
	c->dead = PCOR_ERR_TIMEDOUT;
}

static bool open_peer(const pcori_conn_t *c)
{
	return !c->dead && c->pid >= 0 && c->state == PCORI_CONN_OPEN &&
	       pcori_agent_is_peer(c);
}

/* Tell every other member that pid is fenced out for ms of silence. */
static void tell_silent(int pid, uint64_t ms)
{
	pcori_wbuf_t w = {0};
	pcori_frame_begin(&w, PCORI_CTL_SILENT);
	pcori_w_u32(&w, (uint32_t)pid);
	pcori_w_u32(&w, (uint32_t)PCORI_MIN(ms, UINT32_MAX));
	if (pcori_frame_end(&w)) {
		pcori_list_t *pos;
		pcori_list_foreach(pos, &NM.conns)
		{
			pcori_conn_t *c =
				PCORI_CONTAINER_OF(pos, pcori_conn_t, link);
			if (c->pid != pid && open_peer(c))
				pcori_agent_push(c, &w);
		}
	}
	pcori_wbuf_free(&w);
}

int pcori_live_silent(int from, pcori_rbuf_t *r)
{
	uint32_t pid = pcori_r_u32(r);
	uint32_t ms = pcori_r_u32(r);
	if (!pcori_r_done(r) || pid > INT32_MAX)
		return PCOR_ERR_PROTO;
	pcori_view_t *e = pcori_agent_view((int)pid);
	/* About us: its FENCED tells us, if it can reach us at all. */
	if (!e || (int)pid == NM.boot.pid || !pcori_agent_view_live(e))
		return PCOR_OK;
	PCORI_WARN(PCORI_SUB_NAMING,
		   "agent: process %d declared process %d lost after %u ms "
		   "of silence: fencing it out here too",
		   from, (int)pid, ms);
	if (e->conn && !e->conn->dead)
		fence(e->conn, ms); /* reaped: the failure event */
	else
		pcori_agent_member_gone(e, false);
	return PCOR_OK;
}

/* Starved peers wait at most this many timeouts for their verdict. */
#define PCORI_STARVED_MAX 16
/*
 * A process that used less than this share of one CPU over a whole
 * timeout is hung: its threads all wait.  Not none at all: a runtime's
 * own housekeeping (a sanitizer's background thread, timers) is charged
 * a clock tick now and then.  A starved one's threads want CPU and get
 * their share of it.
 */
#define PCORI_STARVED_BUSY_DIV 32

/* The clock ticks of CPU time that tell a starved process over t ns. */
static uint64_t busy_ticks(uint64_t t)
{
	long hz = sysconf(_SC_CLK_TCK);
	if (hz <= 0)
		hz = 100;
	uint64_t ticks = t / 1000000u * (uint64_t)hz / 1000u;
	return PCORI_MAX(ticks / PCORI_STARVED_BUSY_DIV, 1u);
}

/*
 * c has been silent for the whole timeout: does the kernel say its
 * process runs here and uses CPU?  Looked at every quarter of the
 * timeout (a stopped process is fenced at once), its CPU time judged
 * once a timeout: too little of it over the last one, and it is hung,
 * however it got there.  Not at every look: a starved process may use
 * none for a while, its threads queued behind a lock holder that waits
 * for a CPU.  true: judge again at c->recheck_ns.
 */
static bool starved(pcori_conn_t *c, uint64_t now, uint64_t timeout)
{
	uint64_t cpu;
	if (c->starved_ns && c->last_rx_ns > c->starved_ns)
		c->starved_ns = 0; /* it spoke since: a new silence */
	/*
	 * What it named itself is taken as said: a member (it has the key)
	 * that named another running process buys at most the bound below.
	 */
	if (!pcori_os_proc_running(&c->proc, &NM.self_proc, &cpu))
		return false;
	if (!c->starved_ns) {
		/* The first look opens the first window. */
		c->starved_ns = c->win_ns = now;
		c->win_cpu = cpu;
	} else if (now - c->win_ns >= timeout) {
		if (cpu - c->win_cpu < busy_ticks(now - c->win_ns))
			return false;
		/* Said once a silence: at the first window found busy. */
		if (c->win_ns == c->starved_ns)
			PCORI_WARN(PCORI_SUB_NAMING,
				   "agent: process %d silent for %llu ms, but it "
				   "runs on this host and uses CPU: starved, not "
				   "lost; waiting (at most %lld ms in all)",
				   c->pid,
				   (unsigned long long)((now - c->last_rx_ns) /
							1000000),
				   (long long)(PCORI_STARVED_MAX *
					       NM.peer_timeout_ms));
		c->win_ns = now;
		c->win_cpu = cpu;
	}
	if (now - c->starved_ns >= PCORI_STARVED_MAX * timeout)
		return false;
	c->recheck_ns = now + timeout / 4;
	return true;
}

uint64_t pcori_live_tick(uint64_t now)
{
	static uint64_t last_tick;
	uint64_t timeout = ms_ns(NM.peer_timeout_ms), idle = timeout / 4;
	uint64_t next = UINT64_MAX;
	/*
	 * This loop runs at least every `idle` while there are peers.  A
	 * longer gap means we were the silent one (stopped, or starved of
	 * CPU): what the peers sent meanwhile is unread in our sockets, so
	 * they get a fresh timeout rather than the blame.
	 */
	bool stalled = last_tick && now - last_tick > 2 * idle;
	last_tick = now;
	pcori_wbuf_t ping = {0};
	pcori_frame_begin(&ping, PCORI_CTL_PING);
	pcori_frame_end(&ping);
	pcori_list_t *pos;
	pcori_list_foreach(pos, &NM.conns)
	{
		pcori_conn_t *c = PCORI_CONTAINER_OF(pos, pcori_conn_t, link);
		if (!open_peer(c))
			continue;
		if (stalled)
			c->last_rx_ns = now;
		bool silent = now - c->last_rx_ns >= timeout;
		if (silent && now >= c->recheck_ns &&
		    !starved(c, now, timeout)) {
			uint64_t ms = (now - c->last_rx_ns) / 1000000;
			PCORI_WARN(PCORI_SUB_NAMING,
				   "agent: process %d at %s silent for %llu ms "
				   "(peer timeout %lld ms): declaring it lost "
				   "and fencing it out",
				   c->pid, pcori_agent_view(c->pid)
						   ? pcori_agent_view(c->pid)->agent
						   : "?",
				   (unsigned long long)ms,
				   (long long)NM.peer_timeout_ms);
			fence(c, ms);
			tell_silent(c->pid, ms);
			continue;
		}
		if (now - c->last_tx_ns >= idle && ping.len) {
			pcori_agent_push(c, &ping);
			c->last_tx_ns = now;
		}
		next = PCORI_MIN(next, silent ? c->recheck_ns
					      : c->last_rx_ns + timeout);
		next = PCORI_MIN(next, c->last_tx_ns + idle);
	}
	pcori_wbuf_free(&ping);
	return next;
}

int pcori_live_fenced(int pid, pcori_rbuf_t *r)
{
	uint32_t ms = pcori_r_u32(r);
	if (!pcori_r_done(r))
		return PCOR_ERR_PROTO;
	PCORI_ERROR(PCORI_SUB_NAMING,
		    "agent: process %d declared this process lost after %u ms "
		    "of silence (stopped or hung?): fenced out, every peer "
		    "refuses it from now on",
		    pid, ms);
	atomic_store(&NM.fenced, true);
	return PCOR_ERR_PEER_LOST;
}
