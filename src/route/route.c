/*
 * route.c -- shortest paths over the processes of the job.
 *
 * Design notes: a job has at most a few thousand processes with a handful
 * of ports each, and routes are recomputed only on membership events, so
 * a plain O(n^2) Dijkstra over an implicit graph is enough.  Networks are
 * compared by a hash first and by name only when the hashes agree.
 */
#include "route.h"

int pcori_link_cost(int link_class)
{
	/* Each class costs more than any two of the cheaper ones. */
	static const int cost[] = {0, 1, 3, 7, 15};
	return link_class >= 0 && link_class < (int)PCORI_ARRAY_LEN(cost)
		       ? cost[link_class]
		       : 31;
}

static uint64_t net_hash(const char *s)
{
	uint64_t h = 14695981039346656037ull;
	for (; *s; s++)
		h = (h ^ (uint8_t)*s) * 1099511628211ull;
	return h;
}

/* Cheapest link between a and b; its port indexes.  -1 if none. */
static int link_between(const pcori_member_t *a, const uint64_t *ha,
			const pcori_member_t *b, const uint64_t *hb, int *pa,
			int *pb, int *cls)
{
	int best = -1;
	for (int i = 0; i < a->nports; i++)
		for (int j = 0; j < b->nports; j++) {
			if (ha[i] != hb[j] ||
			    strcmp(a->ports[i].network, b->ports[j].network))
				continue;
			int c = pcori_link_cost(a->ports[i].link_class);
			if (best < 0 || c < best) {
				best = c;
				*pa = i;
				*pb = j;
				*cls = a->ports[i].link_class;
			}
		}
	return best;
}

int pcori_route_compute(const pcori_member_t *const *members, int n, int src,
			pcori_route_entry_t *out)
{
	uint64_t *h = calloc((size_t)n * PCORI_MAX_PORTS, sizeof(*h));
	bool *done = calloc((size_t)n, sizeof(*done));
	if (!h || !done) {
		free(h);
		free(done);
		return PCOR_ERR_NOMEM;
	}
	for (int p = 0; p < n; p++) {
		out[p] = (pcori_route_entry_t){-1, -1, -1, 0, INT_MAX, 0};
		for (int i = 0; members[p] && i < members[p]->nports; i++)
			h[(size_t)p * PCORI_MAX_PORTS + (size_t)i] =
				net_hash(members[p]->ports[i].network);
	}
	if (src < 0 || src >= n || !members[src])
		goto out;
	out[src] = (pcori_route_entry_t){src, -1, -1, 0, 0, PCORI_LINK_SELF};

	for (;;) {
		/* The closest process not done yet. */
		int u = -1;
		for (int p = 0; p < n; p++) {
			if (done[p] || out[p].cost == INT_MAX)
				continue;
			if (u < 0 || out[p].cost < out[u].cost ||
			    (out[p].cost == out[u].cost &&
			     out[p].hops < out[u].hops))
				u = p;
		}
		if (u < 0)
			break;
		done[u] = true;
		for (int v = 0; v < n; v++) {
			if (done[v] || !members[v])
				continue;
			int pa = -1, pb = -1, cls = 0;
			int c = link_between(members[u],
					     &h[(size_t)u * PCORI_MAX_PORTS],
					     members[v],
					     &h[(size_t)v * PCORI_MAX_PORTS], &pa,
					     &pb, &cls);
			if (c < 0)
				continue;
			pcori_route_entry_t cand = out[u];
			cand.cost += c;
			cand.hops++;
			if (u == src) { /* the first link decides the port */
				cand.next_hop = v;
				cand.port = pa;
				cand.peer_port = pb;
				cand.link_class = cls;
			}
			pcori_route_entry_t *cur = &out[v];
			if (cand.cost < cur->cost ||
			    (cand.cost == cur->cost &&
			     (cand.hops < cur->hops ||
			      (cand.hops == cur->hops &&
			       cand.next_hop < cur->next_hop))))
				*cur = cand;
		}
	}
out:
	for (int p = 0; p < n; p++)
		if (out[p].cost == INT_MAX)
			out[p] = (pcori_route_entry_t){-1, -1, -1, 0, -1, 0};
	free(h);
	free(done);
	return PCOR_OK;
}
