/*
 * tree.c -- barrier, broadcast, reduce and allreduce, flat or by host.
 *
 * Each algorithm works on a group: a list of communicator ranks and our
 * index in it (-1: not a member).  A flat collective runs over the whole
 * communicator.  When the communicator spans several hosts and some host
 * holds more than one of its ranks, it runs in three phases instead: the
 * ranks of each host among themselves (pcor-shm), then one rank per host
 * over the network (so each host has one network edge per step), then
 * each host again.  Folding by host changes the order of operands, so
 * only the predefined (commutative) operations go that way.
 *
 * Large messages take other algorithms, chosen by size (knobs
 * PCOR_MPI_BCAST_LARGE and PCOR_MPI_ALLREDUCE_LARGE, read at MPI_Init):
 * a broadcast among 3 or more members scatters the message in n blocks
 * down a binomial tree and gathers them all round a ring (van de Geijn);
 * an allreduce with a predefined operation halves the vector recursively
 * while reducing (reduce-scatter), then doubles it back (allgather)
 * (Rabenseifner).  In the three phases by host each phase chooses for
 * itself.  The choice depends only on arguments every member passes
 * alike (size, group, operation), so all members choose the same.
 *
 * Every rank reserves the same tag rounds in the same order whether or
 * not it takes part in a phase, so the phases' messages match.
 */
#include <stdlib.h>
#include <string.h>

#include "mpii.h"

/* The predefined operations: they commute, user ones need not. */
static bool commutes(MPI_Op op)
{
	return op >= MPI_MAX && op <= MPI_MAXLOC;
}

typedef struct grp {
	const int *m; /* comm ranks; NULL: 0 .. n-1 */
	int n, me;
} grp_t;

static int at(const grp_t *g, int i)
{
	return g->m ? g->m[i] : i;
}

/* Dissemination: ceil(log2 n) rounds of one exchange each. */
static void g_barrier(sched_t *s, const grp_t *g)
{
	unsigned base = pcori_mpi_sched_stage(s, 32);
	if (g->me < 0)
		return;
	int n = g->n;
	for (int k = 1, i = 0; k < n; k <<= 1, i++) {
		s->round = (uint8_t)(base + i);
		pcori_mpi_sched_recv(s, at(g, (g->me - k + n) % n), NULL, 0);
		pcori_mpi_sched_send(s, at(g, (g->me + k) % n), NULL, 0);
		pcori_mpi_sched_fence(s);
	}
}

/* Binomial tree from member root. */
static void g_bcast(sched_t *s, const grp_t *g, void *buf, size_t len, int root)
{
	pcori_mpi_sched_stage(s, 1); /* one message per rank: one round */
	if (g->me < 0)
		return;
	int n = g->n, v = (g->me - root + n) % n, mask = 1;
	while (mask < n) {
		if (v & mask) {
			pcori_mpi_sched_recv(s, at(g, (v - mask + root) % n),
					     buf, len);
			pcori_mpi_sched_fence(s);
			break;
		}
		mask <<= 1;
	}
	for (mask >>= 1; mask > 0; mask >>= 1)
		if (v + mask < n)
			pcori_mpi_sched_send_hold(
			    s, at(g, (v + mask + root) % n), buf, len);
	pcori_mpi_sched_fence(s);
}

/* Byte offset of block j of n equal blocks (to a byte) over len bytes. */
static size_t boff(size_t len, int n, int j)
{
	return len / (size_t)n * (size_t)j +
	       (len % (size_t)n) * (size_t)j / (size_t)n;
}

/*
 * Scatter + allgather from member root (van de Geijn): block j of n goes
 * to the member j after the root.  A binomial tree hands each subtree its
 * blocks, one message per edge (member v's subtree holds the blocks [v,
 * v + lowest bit of v)), then a ring passes every block round: n - 1
 * rounds of one block each way.  Each member receives about 2 len bytes
 * (n - 1) / n in all, against len per level of the binomial tree.
 */
static void g_bcast_sag(sched_t *s, const grp_t *g, char *buf, size_t len,
			int root)
{
	int n = g->n;
	unsigned base = pcori_mpi_sched_stage(s, (unsigned)n);
	if (g->me < 0)
		return;
	int v = (g->me - root + n) % n, mask = 1;
	while (mask < n && !(v & mask))
		mask <<= 1;
	if (v) {
		int end = v + mask < n ? v + mask : n;
		size_t lo = boff(len, n, v), hi = boff(len, n, end);
		pcori_mpi_sched_recv(s, at(g, (v - mask + root) % n), buf + lo,
				     hi - lo);
		pcori_mpi_sched_fence(s);
	}
	for (mask >>= 1; mask > 0; mask >>= 1) {
		int c = v + mask;
		if (c >= n)
			continue;
		int end = c + mask < n ? c + mask : n;
		size_t lo = boff(len, n, c), hi = boff(len, n, end);
		pcori_mpi_sched_send_hold(s, at(g, (c + root) % n), buf + lo,
					  hi - lo);
	}
	pcori_mpi_sched_fence(s);
	int left = at(g, (v - 1 + n + root) % n),
	    right = at(g, (v + 1 + root) % n);
	for (int k = 0; k < n - 1; k++) {
		int sb = (v - k + n) % n, rb = (v - k - 1 + n) % n;
		size_t so = boff(len, n, sb), ro = boff(len, n, rb);
		s->round = (uint8_t)(base + 1 + k);
		pcori_mpi_sched_recv(s, left, buf + ro,
				     boff(len, n, rb + 1) - ro);
		pcori_mpi_sched_send_hold(s, right, buf + so,
					  boff(len, n, sb + 1) - so);
		pcori_mpi_sched_fence(s);
	}
}

/* Broadcast on g: binomial tree, or scatter + allgather when large. */
static void g_bcast_any(sched_t *s, const grp_t *g, void *buf, size_t len,
			int root)
{
	if (g->n >= 3 && len >= pcori_mpi.bcast_large)
		g_bcast_sag(s, g, buf, len, root);
	else
		g_bcast(s, g, buf, len, root);
}

/*
 * Reduce into out at member root.  Binomial towards member 0: member i
 * folds the block [i + mask, i + 2 mask) after its own [i, i + mask), so
 * the fold is in member order; then one hop to the root.
 */
static void g_reduce(sched_t *s, const grp_t *g, const void *in, void *out,
		     int count, MPI_Datatype t, MPI_Op op, int root)
{
	unsigned base = pcori_mpi_sched_stage(s, 2);
	if (g->me < 0)
		return;
	int n = g->n, r = g->me;
	size_t len = (size_t)count * pcori_mpi_type(t)->size;
	const void *acc = in;
	for (int mask = 1; mask < n; mask <<= 1) {
		if (r & mask) {
			pcori_mpi_sched_send(s, at(g, r - mask), acc, len);
			pcori_mpi_sched_fence(s);
			break;
		}
		if (r + mask < n) {
			void *tmp = pcori_mpi_sched_alloc(s, len);
			pcori_mpi_sched_recv(s, at(g, r + mask), tmp, len);
			pcori_mpi_sched_fence(s);
			pcori_mpi_sched_reduce(s, op, t, acc, tmp, count);
			acc = tmp;
		}
	}
	s->round = (uint8_t)(base + 1);
	if (r == 0 && root == 0)
		pcori_mpi_sched_copy(s, acc, out, len);
	else if (r == 0)
		pcori_mpi_sched_send(s, at(g, root), acc, len);
	else if (r == root)
		pcori_mpi_sched_recv(s, at(g, 0), out, len);
	pcori_mpi_sched_fence(s);
}

/*
 * The fold to a power of two p2 shared by both allreduces: of the first
 * 2 * rem members the even one hands work to the odd one, which folds it
 * in, and later gets the result into out in round last.  Returns the
 * member's index among the p2 that go on, or -1 for an even one (whose
 * schedule is complete).
 */
static int fold_in(sched_t *s, const grp_t *g, int rem, void *work, void *out,
		   size_t len, MPI_Op op, MPI_Datatype t, int count,
		   uint8_t last)
{
	int r = g->me;
	if (r < 2 * rem && r % 2 == 0) {
		pcori_mpi_sched_send(s, at(g, r + 1), work, len);
		pcori_mpi_sched_fence(s);
		s->round = last;
		pcori_mpi_sched_recv(s, at(g, r + 1), out, len);
		pcori_mpi_sched_fence(s);
		return -1;
	}
	if (r >= 2 * rem)
		return r - rem;
	void *tmp = pcori_mpi_sched_alloc(s, len);
	pcori_mpi_sched_recv(s, at(g, r - 1), tmp, len);
	pcori_mpi_sched_fence(s);
	pcori_mpi_sched_reduce(s, op, t, tmp, work, count);
	return r / 2;
}

/*
 * Recursive doubling, pairs folded lower member first.  With n not a
 * power of two, the first 2 * rem members pair off: the even one hands
 * its data to the odd one and gets the result back at the end.
 */
static void g_allreduce(sched_t *s, const grp_t *g, const void *in, void *out,
			int count, MPI_Datatype t, MPI_Op op)
{
	int n = g->n, r = g->me, p2 = 1, logp = 0;
	while (p2 * 2 <= n) {
		p2 *= 2;
		logp++;
	}
	unsigned base = pcori_mpi_sched_stage(s, logp + 2);
	if (r < 0)
		return;
	size_t len = (size_t)count * pcori_mpi_type(t)->size;
	int rem = n - p2, v;
	void *work = pcori_mpi_sched_alloc(s, len);
	pcori_mpi_sched_copy(s, in, work, len);
	v = fold_in(s, g, rem, work, out, len, op, t, count,
		    (uint8_t)(base + 1 + logp));
	if (v < 0)
		return;
	for (int mask = 1, i = 0; mask < p2; mask <<= 1, i++) {
		int pv = v ^ mask;
		int peer = at(g, pv < rem ? 2 * pv + 1 : pv + rem);
		void *tmp = pcori_mpi_sched_alloc(s, len);
		s->round = (uint8_t)(base + 1 + i);
		pcori_mpi_sched_recv(s, peer, tmp, len);
		pcori_mpi_sched_send(s, peer, work, len);
		pcori_mpi_sched_fence(s);
		if (pv < v) {
			pcori_mpi_sched_reduce(s, op, t, tmp, work, count);
		} else {
			pcori_mpi_sched_reduce(s, op, t, work, tmp, count);
			work = tmp;
		}
	}
	pcori_mpi_sched_copy(s, work, out, len);
	if (r < 2 * rem) {
		s->round = (uint8_t)(base + 1 + logp);
		pcori_mpi_sched_send(s, at(g, r - 1), work, len);
	}
	pcori_mpi_sched_fence(s);
}

/*
 * Rabenseifner's allreduce, for commutative operations: with p2 the
 * largest power of two <= n, the extra members hand their data to a
 * partner first (as g_allreduce).  The p2 others split the vector in p2
 * blocks (element counts differing by at most one) and halve it
 * recursively: in step i each keeps half of its current range, sends
 * the other half to the partner across bit log2(p2) - 1 - i, and folds
 * in what the partner sent of the half it keeps.  Member v then holds
 * block v reduced over everyone; recursive doubling gathers the blocks
 * back.  Each block is folded at one member only, so every member ends
 * with the same bits.  Each member sends and receives about 2 len bytes
 * and folds len, against log2(p2) len for recursive doubling.
 */
static void g_allreduce_rsag(sched_t *s, const grp_t *g, const void *in,
			     void *out, int count, MPI_Datatype t, MPI_Op op)
{
	int n = g->n, r = g->me, p2 = 1, logp = 0;
	while (p2 * 2 <= n) {
		p2 *= 2;
		logp++;
	}
	unsigned base = pcori_mpi_sched_stage(s, 2 * logp + 2);
	if (r < 0)
		return;
	size_t es = pcori_mpi_type(t)->size, len = (size_t)count * es;
	int rem = n - p2, v;
	char *work = out;
	pcori_mpi_sched_copy(s, in, work, len);
	v = fold_in(s, g, rem, work, out, len, op, t, count,
		    (uint8_t)(base + 1 + 2 * logp));
	if (v < 0)
		return;
		/* Element offsets of the blocks; a half is at most count -
		 * count/2. */
#define EOFF(j) ((size_t)count / p2 * (j) + (size_t)count % p2 * (j) / p2)
	char *half = pcori_mpi_sched_alloc(s, (count - count / 2) * es);
	int lo = 0, hi = p2;
	for (int mask = p2 / 2, i = 0; mask > 0; mask >>= 1, i++) {
		int pv = v ^ mask, mid = (lo + hi) / 2;
		int peer = at(g, pv < rem ? 2 * pv + 1 : pv + rem);
		int klo = v & mask ? mid : lo, khi = v & mask ? hi : mid;
		int slo = v & mask ? lo : mid, shi = v & mask ? mid : hi;
		size_t kn = EOFF(khi) - EOFF(klo), sn = EOFF(shi) - EOFF(slo);
		s->round = (uint8_t)(base + 1 + i);
		pcori_mpi_sched_recv(s, peer, half, kn * es);
		pcori_mpi_sched_send(s, peer, work + EOFF(slo) * es, sn * es);
		pcori_mpi_sched_fence(s);
		pcori_mpi_sched_reduce(s, op, t, half, work + EOFF(klo) * es,
				       (int)kn);
		lo = klo;
		hi = khi;
	}
	for (int mask = 1, i = 0; mask < p2; mask <<= 1, i++) {
		int pv = v ^ mask, plo = pv / mask * mask;
		int peer = at(g, pv < rem ? 2 * pv + 1 : pv + rem);
		s->round = (uint8_t)(base + 1 + logp + i);
		pcori_mpi_sched_recv(s, peer, work + EOFF(plo) * es,
				     (EOFF(plo + mask) - EOFF(plo)) * es);
		pcori_mpi_sched_send(s, peer, work + EOFF(lo) * es,
				     (EOFF(lo + mask) - EOFF(lo)) * es);
		pcori_mpi_sched_fence(s);
		lo = lo < plo ? lo : plo;
	}
#undef EOFF
	if (r < 2 * rem) {
		s->round = (uint8_t)(base + 1 + 2 * logp);
		pcori_mpi_sched_send(s, at(g, r - 1), work, len);
	}
	pcori_mpi_sched_fence(s);
}

/* Allreduce on g: recursive doubling, or Rabenseifner's when large. */
static void g_allreduce_any(sched_t *s, const grp_t *g, const void *in,
			    void *out, int count, MPI_Datatype t, MPI_Op op,
			    bool commutative)
{
	int p2 = 1;
	while (p2 * 2 <= g->n)
		p2 *= 2;
	size_t len = (size_t)count * pcori_mpi_type(t)->size;
	if (commutative && g->n >= 2 && count >= p2 &&
	    len >= pcori_mpi.allreduce_large)
		g_allreduce_rsag(s, g, in, out, count, t, op);
	else
		g_allreduce(s, g, in, out, count, t, op);
}

/* ------------------------------------------------------------ hosts */

typedef struct hier {
	int nhosts;
	int *lead;  /* per host, in order of its lowest rank: that rank */
	int *host;  /* comm rank -> host index */
	int *local; /* the ranks of our host, ascending */
	int nlocal, lidx, myhost;
} hier_t;

void pcori_mpi_hier_free(struct hier *h)
{
	if (h) {
		free(h->lead);
		free(h->host);
		free(h->local);
		free(h);
	}
}

/*
 * The host layout of c, found once from pcor's directory (the same
 * answer on every member); NULL when a flat algorithm is as good (one
 * host, or one rank per host) or the layout cannot be had.
 */
static const hier_t *hier_of(comm_t *c)
{
	int st = atomic_load(&c->hier_state);
	if (st)
		return st == 2 ? c->hier : NULL;
	int n = c->size;
	hier_t *h = calloc(1, sizeof(*h));
	char(*names)[PCOR_HOST_MAX] = malloc(n * sizeof(*names));
	if (h) {
		h->lead = malloc(n * sizeof(int));
		h->host = malloc(n * sizeof(int));
		h->local = malloc(n * sizeof(int));
	}
	bool ok = h && names && h->lead && h->host && h->local;
	for (int r = 0; r < n && ok; r++) {
		pcor_proc_info_t pi;
		ok = pcor_proc_info(c->pids[r], &pi) == PCOR_OK;
		if (!ok)
			break;
		memcpy(names[r], pi.host, PCOR_HOST_MAX);
		names[r][PCOR_HOST_MAX - 1] = '\0';
		int k = 0;
		while (k < h->nhosts && strcmp(names[h->lead[k]], names[r]))
			k++;
		if (k == h->nhosts)
			h->lead[h->nhosts++] = r;
		h->host[r] = k;
	}
	if (ok) {
		h->myhost = h->host[c->rank];
		for (int r = 0; r < n; r++)
			if (h->host[r] == h->myhost) {
				if (r == c->rank)
					h->lidx = h->nlocal;
				h->local[h->nlocal++] = r;
			}
	}
	free(names);
	bool use = ok && h->nhosts > 1 && h->nhosts < n;
	if (!use) {
		pcori_mpi_hier_free(h);
		h = NULL;
	}
	c->hier = h;
	atomic_store(&c->hier_state, use ? 2 : 1);
	return h;
}

/* Our host's ranks, and the leaders (one per host), as groups. */
static void groups(const comm_t *c, const hier_t *h, grp_t *loc, grp_t *lead)
{
	*loc = (grp_t){h->local, h->nlocal, h->lidx};
	*lead = (grp_t){h->lead, h->nhosts,
			h->lead[h->myhost] == c->rank ? h->myhost : -1};
}

void pcori_mpi_b_barrier(sched_t *s)
{
	comm_t *c = s->c;
	const hier_t *h = hier_of(c);
	if (!h) {
		g_barrier(s, &(grp_t){NULL, c->size, c->rank});
		return;
	}
	grp_t loc, lead;
	groups(c, h, &loc, &lead);
	/* In at the leader, leaders meet, out from the leader. */
	g_reduce(s, &loc, NULL, NULL, 0, MPI_INT, MPI_SUM, 0);
	g_barrier(s, &lead);
	g_bcast(s, &loc, NULL, 0, 0);
}

void pcori_mpi_b_bcast(sched_t *s, void *buf, size_t len, int root)
{
	comm_t *c = s->c;
	const hier_t *h = hier_of(c);
	if (!h) {
		g_bcast_any(s, &(grp_t){NULL, c->size, c->rank}, buf, len,
			    root);
		return;
	}
	/* The root stands for its host; elsewhere the lowest rank. */
	int *lead = pcori_mpi_sched_alloc(s, h->nhosts * sizeof(int));
	if (!lead)
		return;
	memcpy(lead, h->lead, h->nhosts * sizeof(int));
	int rh = h->host[root];
	lead[rh] = root;
	grp_t lg = {lead, h->nhosts,
		    lead[h->myhost] == c->rank ? h->myhost : -1};
	g_bcast_any(s, &lg, buf, len, rh);
	int lroot = 0;
	while (h->local[lroot] != lead[h->myhost])
		lroot++;
	g_bcast_any(s, &(grp_t){h->local, h->nlocal, h->lidx}, buf, len, lroot);
}

void pcori_mpi_b_reduce(sched_t *s, const void *in, void *out, int count,
			MPI_Datatype t, MPI_Op op, int root)
{
	comm_t *c = s->c;
	const hier_t *h = commutes(op) ? hier_of(c) : NULL;
	if (!h) {
		g_reduce(s, &(grp_t){NULL, c->size, c->rank}, in, out, count, t,
			 op, root);
		return;
	}
	grp_t loc, lg;
	groups(c, h, &loc, &lg);
	size_t len = (size_t)count * pcori_mpi_type(t)->size;
	/* Each host to its leader, leaders to the root host's leader. */
	void *part = pcori_mpi_sched_alloc(s, len);
	void *all = pcori_mpi_sched_alloc(s, len);
	g_reduce(s, &loc, in, part, count, t, op, 0);
	int rh = h->host[root];
	g_reduce(s, &lg, part, all, count, t, op, rh);
	/* Last hop, on the root's host, if the root is not its leader. */
	pcori_mpi_sched_stage(s, 1);
	int lr = h->lead[rh];
	if (c->rank == root && root == lr)
		pcori_mpi_sched_copy(s, all, out, len);
	else if (c->rank == lr)
		pcori_mpi_sched_send(s, root, all, len);
	else if (c->rank == root)
		pcori_mpi_sched_recv(s, lr, out, len);
	pcori_mpi_sched_fence(s);
}

void pcori_mpi_b_allreduce(sched_t *s, const void *in, void *out, int count,
			   MPI_Datatype t, MPI_Op op)
{
	comm_t *c = s->c;
	const hier_t *h = commutes(op) ? hier_of(c) : NULL;
	if (!h) {
		g_allreduce_any(s, &(grp_t){NULL, c->size, c->rank}, in, out,
				count, t, op, commutes(op));
		return;
	}
	grp_t loc, lg;
	groups(c, h, &loc, &lg);
	size_t len = (size_t)count * pcori_mpi_type(t)->size;
	void *part = pcori_mpi_sched_alloc(s, len);
	/* Reduce on each host, allreduce among leaders, share on each host. */
	g_reduce(s, &loc, in, part, count, t, op, 0);
	g_allreduce_any(s, &lg, part, out, count, t, op, true);
	g_bcast_any(s, &loc, out, len, 0);
}
