/*
 * public.c -- the route table as the public API shows it: what route a
 * destination takes, a dump of the table, and placement by link class.
 *
 * Design notes: route_info answers with the route a send would use (the
 * peer's published route, set up on demand), while the dump and the
 * placement read the table itself.  Placement computes paths from the
 * target pid, not from us: links are symmetric (both ends of a link are
 * on one network, hence one provider and class), so the cost from pid to
 * a candidate is the cost the candidate would pay to reach pid.
 */
#include "../frag/msg.h" /* peers and ports */

#include <errno.h>
#include <unistd.h>

_Static_assert(PCOR_LINK_SELF == (int)PCORI_LINK_SELF &&
		       PCOR_LINK_SHM == (int)PCORI_LINK_SHM &&
		       PCOR_LINK_RDMA == (int)PCORI_LINK_RDMA &&
		       PCOR_LINK_TCP == (int)PCORI_LINK_TCP &&
		       PCOR_LINK_UDP == (int)PCORI_LINK_UDP,
	       "public and internal link classes must agree");
_Static_assert(PCOR_NETWORK_MAX >= PCORI_NET_MAX, "network name room");

static const char *class_name(int c)
{
	static const char *names[] = {"self", "shm", "rdma", "tcp", "udp"};
	return c >= 0 && c < (int)PCORI_ARRAY_LEN(names) ? names[c] : "?";
}

PCOR_API int pcor_route_info(int pid, pcor_route_info_t *info_p)
{
	int rc = pcori_rt_check();
	if (rc)
		return rc;
	if (!info_p)
		return PCOR_ERR_INVAL;
	if (pid < 0 || pid >= atomic_load(&pcori_rt.nprocs))
		return PCOR_ERR_BADPID;
	pcor_route_info_t r;
	memset(&r, 0, sizeof(r));
	r.pid = pid;
	if (pid == pcori_rt.pid) {
		r.port = -1;
		r.next_hop = pid;
		r.link_class = PCOR_LINK_SELF;
		*info_p = r;
		return PCOR_OK;
	}
	if (!pcori_net.up)
		return PCOR_ERR_UNREACHABLE;
	pcori_peer_t *peer = pcori_peer_get(pid);
	if (!peer)
		return PCOR_ERR_NOMEM; /* pid was checked: the table could not grow */
	if ((rc = pcori_peer_ready(peer)))
		return rc;
	pcori_route_t *rt = pcori_peer_route(peer);
	if (!rt)
		return PCOR_ERR_UNREACHABLE;
	r.port = rt->port->index;
	r.next_hop = rt->next_hop;
	r.hops = rt->hops;
	r.link_class = rt->link_class;
	snprintf(r.provider, sizeof(r.provider), "%s", rt->port->info.provider);
	snprintf(r.network, sizeof(r.network), "%s", rt->port->info.network);
	*info_p = r;
	return PCOR_OK;
}

static int write_all(int fd, const char *s, size_t n)
{
	while (n) {
		ssize_t w = write(fd, s, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return PCOR_ERR_SYSTEM;
		s += w;
		n -= (size_t)w;
	}
	return PCOR_OK;
}

PCOR_API int pcor_route_dump(int fd)
{
	int rc = pcori_rt_check();
	if (rc)
		return rc;
	if (fd < 0)
		return PCOR_ERR_INVAL;
	pcori_route_entry_t *tab = NULL;
	int n = 0;
	if (pcori_net.up && (rc = pcori_routes_copy(&tab, &n)))
		return rc;
	char line[256];
	int lim = PCORI_MAX(n, atomic_load(&pcori_rt.nprocs));
	for (int pid = 0; pid < lim; pid++) {
		const pcori_route_entry_t *e = pid < n ? &tab[pid] : NULL;
		int k;
		if (pid == pcori_rt.pid)
			k = snprintf(line, sizeof(line), "route %d: self\n", pid);
		else if (!e || e->next_hop < 0 || e->port < 0 ||
			 e->port >= pcori_net.nports)
			k = snprintf(line, sizeof(line),
				     "route %d: unreachable\n", pid);
		else
			k = snprintf(line, sizeof(line),
				     "route %d: port %d %s, next hop %d, %d "
				     "hops, class %s\n",
				     pid, e->port,
				     pcori_net.ports[e->port]->info.network,
				     e->next_hop, e->hops,
				     class_name(e->link_class));
		if ((rc = write_all(fd, line,
				    PCORI_MIN((size_t)k, sizeof(line) - 1))))
			break;
	}
	free(tab);
	return rc;
}

PCOR_API int pcor_place_best(int pid, const int *cand, int ncand,
			     int *best_p, int *nbest_p, int *class_p)
{
	int rc = pcori_rt_check();
	if (rc)
		return rc;
	if (!cand || ncand < 1 || !best_p || !nbest_p)
		return PCOR_ERR_INVAL;
	int nprocs = atomic_load(&pcori_rt.nprocs);
	if (pid < 0 || pid >= nprocs)
		return PCOR_ERR_BADPID;
	for (int i = 0; i < ncand; i++)
		if (cand[i] < 0 || cand[i] >= nprocs)
			return PCOR_ERR_BADPID;
	pcori_member_t **m;
	int n;
	rc = pcori_members_snapshot(&m, &n);
	/* A partial view still ranks the members it has. */
	if (rc != PCOR_OK && rc != PCOR_INPROGRESS)
		return rc;
	pcori_route_entry_t *tab = calloc((size_t)n, sizeof(*tab));
	if (!tab) {
		pcori_members_free(m, n);
		return PCOR_ERR_NOMEM;
	}
	if (pid >= n || !m[pid]) {
		/* Gone, or not known here yet. */
		pcori_member_t *e = malloc(sizeof(*e));
		int lrc = e ? pcori_dir_lookup(pid, e) : PCOR_ERR_NOMEM;
		free(e);
		rc = lrc == PCOR_OK ? PCOR_ERR_NOPEER : lrc;
		goto out;
	}
	if ((rc = pcori_route_compute((const pcori_member_t *const *)m, n,
				      pid, tab)))
		goto out;
	int best = -1, nbest = 0, cls = 0;
	for (int i = 0; i < ncand; i++) {
		const pcori_route_entry_t *e = cand[i] < n ? &tab[cand[i]]
							   : NULL;
		if (!e || e->next_hop < 0)
			continue;
		if (best < 0 || e->cost < best ||
		    (e->cost == best && e->hops < tab[best_p[0]].hops)) {
			best = e->cost;
			nbest = 0;
			cls = e->link_class;
		} else if (e->cost != best ||
			   e->hops != tab[best_p[0]].hops) {
			continue;
		}
		best_p[nbest++] = cand[i];
	}
	if (!nbest) {
		rc = PCOR_ERR_UNREACHABLE;
		goto out;
	}
	*nbest_p = nbest;
	if (class_p)
		*class_p = cls;
	rc = PCOR_OK;
out:
	free(tab);
	pcori_members_free(m, n);
	return rc;
}

PCOR_API int pcor_thread_spawn_near(int pid, const int *cand, int ncand,
				    const char *name, const void *arg,
				    size_t len, int *pid_p, int *thid_p)
{
	int rc = pcori_rt_check();
	if (rc)
		return rc;
	if (!pid_p || !thid_p || ncand < 1)
		return PCOR_ERR_INVAL;
	int *best = malloc(sizeof(*best) * (size_t)ncand);
	int nbest;
	if (!best)
		return PCOR_ERR_NOMEM;
	rc = pcor_place_best(pid, cand, ncand, best, &nbest, NULL);
	int where = best[0];
	free(best);
	if (rc)
		return rc;
	if ((rc = pcor_thread_spawn(where, name, arg, len, thid_p)))
		return rc;
	*pid_p = where;
	return PCOR_OK;
}

PCOR_API int pcor_spawn_near(int pid, const char *const *hosts,
			     const int *host_pids, int nhosts,
			     char *const argv[], int *pid_p)
{
	int rc = pcori_rt_check();
	if (rc)
		return rc;
	if (!hosts || !host_pids || nhosts < 1 || !pid_p)
		return PCOR_ERR_INVAL;
	for (int i = 0; i < nhosts; i++)
		if (!hosts[i] || !hosts[i][0])
			return PCOR_ERR_INVAL;
	int *best = malloc(sizeof(*best) * (size_t)nhosts);
	int nbest;
	if (!best)
		return PCOR_ERR_NOMEM;
	rc = pcor_place_best(pid, host_pids, nhosts, best, &nbest, NULL);
	int where = best[0];
	free(best);
	if (rc)
		return rc;
	for (int i = 0; i < nhosts; i++)
		if (host_pids[i] == where)
			return pcor_spawn(hosts[i], argv, pid_p);
	return PCOR_ERR_INVAL; /* not reached: where is one of host_pids */
}
