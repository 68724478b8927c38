/*
 * table.c -- the route table of this process: built from a snapshot of
 * the directory, looked up when a peer needs a route, marked stale on
 * membership events and rebuilt, and the routes peers no longer use kept
 * until finalize.
 *
 * Design notes: the table is the entries pcori_route_compute found from
 * this process plus the member entries they came from (a next hop's
 * address on a network is in its entry).  Lookups rebuild a stale table
 * on the spot; otherwise whoever runs the timers rebuilds it once due
 * (pcori_routes_due), and dispatch then moves its peers onto it.  A
 * snapshot missing members not fetched yet gives a usable table that
 * stays stale, so it is built again 10 ms later.  Builds run outside the
 * table's lock (they may wait on the directory) and the newest view wins.
 */
#include "route.h"

typedef struct retired_route {
	struct retired_route *next;
	pcori_route_t *r;
} retired_route_t;

/*
 * The table from this process, and the member entries it was computed
 * from (next hops' addresses come from them).  Rebuilt when membership
 * changes.  Zero but `clean` before the first build (a valid unlocked
 * lock).
 */
static struct {
	/*
	 * Guards tab, members, n, built and retired.  Held only to read or
	 * install: a build asks the directory, which may wait on its agent
	 * thread, and that thread can itself need a route (draining a
	 * leaving peer's ring), so the build runs outside the lock.
	 */
	pcori_lock_t lock;
	pcori_route_entry_t *tab;
	pcori_member_t **members;
	int n;
	uint64_t built; /* the ticket of the build installed */
	_Atomic uint64_t tickets; /* one per build, taken before its view */
	_Atomic uint64_t epoch; /* bumped by every membership change */
	/*
	 * epoch + 1 of the newest complete view installed (0: none): the
	 * table is stale while it differs from epoch + 1.
	 */
	_Atomic uint64_t clean;
	_Atomic uint64_t retry_ns; /* partial table: rebuild after */
	retired_route_t *retired;
} table = {.clean = 1}; /* no table, and none due until a change */

void pcori_members_free(pcori_member_t **members, int n)
{
	for (int i = 0; members && i < n; i++)
		free(members[i]);
	free(members);
}

int pcori_members_snapshot(pcori_member_t ***members_p, int *n_p)
{
	int n = atomic_load(&pcori_rt.nprocs);
	pcori_member_t **m = calloc((size_t)n, sizeof(*m));
	bool incomplete = false;
	if (!m)
		return PCOR_ERR_NOMEM;
	for (int pid = 0; pid < n; pid++) {
		pcori_member_t *e = malloc(sizeof(*e));
		if (!e) {
			pcori_members_free(m, n);
			return PCOR_ERR_NOMEM;
		}
		int lrc = pcori_dir_lookup(pid, e);
		if (lrc == PCOR_OK && e->state == PCORI_MEMBER_ALIVE) {
			m[pid] = e;
			continue;
		}
		free(e);
		/* Not known here yet (joining, or not fetched): look again. */
		if (lrc != PCOR_ERR_PEER_LOST && pid != pcori_rt.pid)
			incomplete = true;
	}
	*members_p = m;
	*n_p = n;
	return incomplete ? PCOR_INPROGRESS : PCOR_OK;
}

/*
 * Recompute the table from a fresh snapshot and install it, unless a
 * build that began later already installed its own (its view is newer:
 * builds install in the order they began, as if they ran one at a
 * time).  Called without table.lock.  Stale is cleared only by a
 * complete view taken after the last membership change.
 */
static int table_build(void)
{
	uint64_t epoch = atomic_load(&table.epoch);
	uint64_t ticket = atomic_fetch_add(&table.tickets, 1) + 1;
	pcori_member_t **m;
	int n;
	int rc = pcori_members_snapshot(&m, &n);
	if (rc && rc != PCOR_INPROGRESS)
		return rc;
	bool incomplete = rc == PCOR_INPROGRESS;
	pcori_route_entry_t *tab = calloc((size_t)n, sizeof(*tab));
	if (!tab || (rc = pcori_route_compute((const pcori_member_t *const *)m,
					      n, pcori_rt.pid, tab))) {
		free(tab);
		pcori_members_free(m, n);
		return rc ? rc : PCOR_ERR_NOMEM;
	}
	/* Logged while still ours: once installed, a later build frees it. */
	if (!incomplete && pcori_log_enabled(PCORI_LOG_INFO, PCORI_SUB_ROUTE))
		for (int pid = 0; pid < n; pid++)
			if (pid != pcori_rt.pid)
				PCORI_INFO(PCORI_SUB_ROUTE,
					   "route to %d: next hop %d, %d hops, "
					   "cost %d, our port %d",
					   pid, tab[pid].next_hop, tab[pid].hops,
					   tab[pid].cost, tab[pid].port);
	pcori_lock(&table.lock);
	if (table.tab && table.built > ticket) {
		/* A newer view is in: ours is older, drop it. */
		pcori_unlock(&table.lock);
		free(tab);
		pcori_members_free(m, n);
		return incomplete ? PCOR_INPROGRESS : PCOR_OK;
	}
	pcori_members_free(table.members, table.n);
	free(table.tab);
	table.members = m;
	table.tab = tab;
	table.n = n;
	table.built = ticket;
	if (!incomplete)
		atomic_store(&table.clean, epoch + 1);
	pcori_unlock(&table.lock);
	/* Built from a partial view: usable, but rebuilt on next use. */
	return incomplete ? PCOR_INPROGRESS : PCOR_OK;
}

static bool table_stale(void)
{
	return atomic_load_explicit(&table.clean, memory_order_relaxed) !=
	       atomic_load_explicit(&table.epoch, memory_order_relaxed) + 1;
}

/* Build the table first if it is missing, stale or shorter than pid. */
static void table_fresh(int pid)
{
	pcori_lock(&table.lock);
	bool build = !table.tab || pid >= table.n || table_stale();
	pcori_unlock(&table.lock);
	if (build)
		(void)table_build();
}

bool pcori_routes_lookup(int pid, pcori_route_entry_t *e_p,
			 pcori_port_info_t *hop_port_p)
{
	bool ok = false;
	table_fresh(pid);
	pcori_lock(&table.lock);
	if (table.tab && pid < table.n && table.tab[pid].next_hop >= 0) {
		*e_p = table.tab[pid];
		const pcori_member_t *hop = table.members[e_p->next_hop];
		if (hop && e_p->peer_port >= 0 && e_p->port >= 0) {
			*hop_port_p = hop->ports[e_p->peer_port];
			ok = true;
		}
	}
	pcori_unlock(&table.lock);
	return ok;
}

int pcori_routes_copy(pcori_route_entry_t **tab_p, int *n_p)
{
	table_fresh(0);
	pcori_lock(&table.lock);
	int n = table.tab ? table.n : 0;
	pcori_route_entry_t *t = malloc(sizeof(*t) * (size_t)(n ? n : 1));
	if (t && n)
		memcpy(t, table.tab, sizeof(*t) * (size_t)n);
	pcori_unlock(&table.lock);
	if (!t)
		return PCOR_ERR_NOMEM;
	*tab_p = t;
	*n_p = n;
	return PCOR_OK;
}

void pcori_routes_stale(void)
{
	atomic_store(&table.retry_ns, 0);
	atomic_fetch_add(&table.epoch, 1);
}

bool pcori_routes_due(void)
{
	return PCORI_UNLIKELY(table_stale()) &&
	       pcori_now_ns() >= atomic_load(&table.retry_ns);
}

int pcori_routes_rebuild(void)
{
	int rc = table_build();
	if (rc != PCOR_OK) /* the view is partial or failed: not again at once */
		atomic_store(&table.retry_ns, pcori_now_ns() + 10000000u);
	return rc;
}

void pcori_route_retire(pcori_route_t *r)
{
	retired_route_t *t = malloc(sizeof(*t));
	if (!t)
		return; /* leaks one small route rather than risk a reader */
	pcori_lock(&table.lock);
	t->r = r;
	t->next = table.retired;
	table.retired = t;
	pcori_unlock(&table.lock);
}

void pcori_routes_fini(void)
{
	while (table.retired) {
		retired_route_t *t = table.retired;
		table.retired = t->next;
		free(t->r);
		free(t);
	}
	pcori_members_free(table.members, table.n);
	free(table.tab);
	memset(&table, 0, sizeof(table));
}
