/*
 * comm.c -- communicators and groups.
 *
 * A communicator is an ordered list of world pids and a context id fresh
 * on every member.  A group is the same list without a context; group
 * handle 0 is MPI_GROUP_EMPTY.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>

#include "mpii.h"

static htable_t comms, groups;

comm_t *pcori_mpi_comm(MPI_Comm c)
{
	if (HKIND(c) != COMM_KIND)
		return NULL;
	return pcori_mpi_tab_get(&comms, HINDEX(c));
}

int pcori_mpi_comm_make(int *pids, int size, uint32_t id, MPI_Errhandler eh,
			MPI_Comm *out_p)
{
	comm_t *c = calloc(1, sizeof(*c));
	int *rank_of = malloc(pcori_mpi.nprocs * sizeof(int));
	if (!c || !rank_of)
		goto err_;
	c->size = size;
	c->pids = pids;
	c->rank_of = rank_of;
	for (int p = 0; p < pcori_mpi.nprocs; p++)
		rank_of[p] = -1;
	c->rank = -1;
	for (int r = 0; r < size; r++) {
		rank_of[pids[r]] = r;
		if (pids[r] == pcori_mpi.pid)
			c->rank = r;
	}
	c->ctx = 4 * id;
	/*
	 * The same id gives the same lanes on every rank: point to point in
	 * the top 64 thread ids, collectives in the 64 below.
	 */
	int maxt = pcor_max_threads(), nl = maxt / 4 < 64 ? maxt / 4 : 64;
	nl = nl > 0 ? nl : 1;
	c->lane = maxt - 1 - (int)(id % (uint32_t)nl);
	c->coll_lane = maxt > 2 * nl ? c->lane - nl : c->lane;
	c->eh = eh;
	int i = pcori_mpi_tab_add(&comms, c, 0);
	if (i < 0)
		goto err_;
	*out_p = (MPI_Comm)(COMM_KIND | (unsigned)i);
	return MPI_SUCCESS;
err_:
	free(rank_of);
	free(c);
	free(pids);
	return MPI_ERR_OTHER;
}

static void comm_destroy(comm_t *c)
{
	pcori_mpi_attr_drop(c);
	pcori_mpi_topo_free(c->topo);
	pcori_mpi_hier_free(c->hier);
	free(c->pids);
	free(c->rank_of);
	free(c);
}

void pcori_mpi_comms_fini(void)
{
	for (int i = 0; i < comms.nslots; i++) {
		comm_t *c = pcori_mpi_tab_get(&comms, i);
		if (c) {
			pcori_mpi_tab_del(&comms, i);
			comm_destroy(c);
		}
	}
	for (int i = 0; i < groups.nslots; i++) {
		group_t *gr = pcori_mpi_tab_get(&groups, i);
		if (gr) {
			pcori_mpi_tab_del(&groups, i);
			free(gr->pids);
			free(gr);
		}
	}
}

int pcori_mpi_agree_ctx(comm_t *c, uint32_t *id_p)
{
	pthread_mutex_lock(&pcori_mpi.lock);
	unsigned mine = pcori_mpi.next_ctx, all;
	pthread_mutex_unlock(&pcori_mpi.lock);
	int rc =
	    pcori_mpi_allreduce_c(c, &mine, &all, 1, MPI_UNSIGNED, MPI_MAX);
	if (rc)
		return rc;
	pthread_mutex_lock(&pcori_mpi.lock);
	if (all + 1 > pcori_mpi.next_ctx)
		pcori_mpi.next_ctx = all + 1;
	pthread_mutex_unlock(&pcori_mpi.lock);
	*id_p = all;
	return MPI_SUCCESS;
}

int MPI_Comm_rank(MPI_Comm comm, int *rank)
{
	CHECK_INIT("MPI_Comm_rank");
	comm_t *c = pcori_mpi_comm(comm);
	if (!c)
		return FAIL(comm, "MPI_Comm_rank", MPI_ERR_COMM);
	if (!rank)
		return FAIL(comm, "MPI_Comm_rank", MPI_ERR_ARG);
	*rank = c->rank;
	return MPI_SUCCESS;
}

int MPI_Comm_size(MPI_Comm comm, int *size)
{
	CHECK_INIT("MPI_Comm_size");
	comm_t *c = pcori_mpi_comm(comm);
	if (!c)
		return FAIL(comm, "MPI_Comm_size", MPI_ERR_COMM);
	if (!size)
		return FAIL(comm, "MPI_Comm_size", MPI_ERR_ARG);
	*size = c->size;
	return MPI_SUCCESS;
}

/* A communicator of c's members listed in pids (taken over), agreed on. */
static int comm_derive(comm_t *c, int *pids, int n, uint32_t id,
		       MPI_Comm *newcomm)
{
	return pcori_mpi_comm_make(pids, n, id, c->eh, newcomm);
}

int MPI_Comm_dup(MPI_Comm comm, MPI_Comm *newcomm)
{
	CHECK_INIT("MPI_Comm_dup");
	comm_t *c = pcori_mpi_comm(comm);
	if (!c)
		return FAIL(comm, "MPI_Comm_dup", MPI_ERR_COMM);
	if (!newcomm)
		return FAIL(comm, "MPI_Comm_dup", MPI_ERR_ARG);
	uint32_t id;
	int rc = pcori_mpi_agree_ctx(c, &id);
	if (rc)
		return FAIL(comm, "MPI_Comm_dup", rc);
	int *pids = malloc(c->size * sizeof(int));
	if (!pids)
		return FAIL(comm, "MPI_Comm_dup", MPI_ERR_OTHER);
	memcpy(pids, c->pids, c->size * sizeof(int));
	MPI_Comm nh;
	rc = comm_derive(c, pids, c->size, id, &nh);
	if (rc)
		return FAIL(comm, "MPI_Comm_dup", rc);
	/* The attributes, through their copy callbacks. */
	comm_t *nc = pcori_mpi_comm(nh);
	rc = pcori_mpi_attr_copy(comm, c, nc);
	if (rc) {
		/* Those copied so far are deleted before the copy goes. */
		pcori_mpi_attr_delete_all(nh, nc);
		pcori_mpi_tab_del(&comms, HINDEX(nh));
		comm_destroy(nc);
		return FAIL(comm, "MPI_Comm_dup", rc);
	}
	*newcomm = nh;
	return MPI_SUCCESS;
}

typedef struct {
	int color, key, rank;
} split_t;

static int split_cmp(const void *a, const void *b)
{
	const split_t *x = a, *y = b;
	if (x->key != y->key)
		return x->key < y->key ? -1 : 1;
	return x->rank < y->rank ? -1 : x->rank > y->rank;
}

int MPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm *newcomm)
{
	CHECK_INIT("MPI_Comm_split");
	comm_t *c = pcori_mpi_comm(comm);
	if (!c)
		return FAIL(comm, "MPI_Comm_split", MPI_ERR_COMM);
	if ((color < 0 && color != MPI_UNDEFINED) || !newcomm)
		return FAIL(comm, "MPI_Comm_split", MPI_ERR_ARG);
	split_t mine = {color, key, c->rank};
	split_t *all = malloc(c->size * sizeof(*all));
	if (!all)
		return FAIL(comm, "MPI_Comm_split", MPI_ERR_OTHER);
	int rc = pcori_mpi_allgather_c(c, &mine, all, sizeof(mine));
	uint32_t id = 0;
	if (!rc)
		rc = pcori_mpi_agree_ctx(c, &id);
	if (rc || color == MPI_UNDEFINED) {
		free(all);
		*newcomm = MPI_COMM_NULL;
		RETURN(comm, "MPI_Comm_split", rc);
	}
	int n = 0;
	for (int r = 0; r < c->size; r++)
		if (all[r].color == color)
			all[n++] = all[r];
	qsort(all, n, sizeof(*all), split_cmp);
	int *pids = malloc(n * sizeof(int));
	for (int r = 0; r < n && pids; r++)
		pids[r] = c->pids[all[r].rank];
	free(all);
	if (!pids)
		return FAIL(comm, "MPI_Comm_split", MPI_ERR_OTHER);
	/* Groups of one split share the id: their members never overlap. */
	RETURN(comm, "MPI_Comm_split", comm_derive(c, pids, n, id, newcomm));
}

int MPI_Comm_split_type(MPI_Comm comm, int split_type, int key, MPI_Info info,
			MPI_Comm *newcomm)
{
	CHECK_INIT("MPI_Comm_split_type");
	(void)info;
	comm_t *c = pcori_mpi_comm(comm);
	if (!c)
		return FAIL(comm, "MPI_Comm_split_type", MPI_ERR_COMM);
	if (split_type == MPI_UNDEFINED)
		return MPI_Comm_split(comm, MPI_UNDEFINED, key, newcomm);
	if (split_type != MPI_COMM_TYPE_SHARED)
		return FAIL(comm, "MPI_Comm_split_type", MPI_ERR_ARG);
	/* Colour: the lowest world pid of this communicator on our host. */
	pcor_proc_info_t me, other;
	if (pcor_proc_info(pcori_mpi.pid, &me) != PCOR_OK)
		return FAIL(comm, "MPI_Comm_split_type", MPI_ERR_INTERN);
	int color = pcori_mpi.pid;
	for (int r = 0; r < c->size; r++) {
		int rc = pcor_proc_info(c->pids[r], &other);
		if (rc == PCOR_OK && !strcmp(other.host, me.host)) {
			color = c->pids[r] < color ? c->pids[r] : color;
			break;
		}
	}
	return MPI_Comm_split(comm, color, key, newcomm);
}

/* IDENT / CONGRUENT-or-SIMILAR / UNEQUAL of two pid lists. */
static int compare_lists(const int *a, int na, const int *b, int nb,
			 int same_result)
{
	if (na != nb)
		return MPI_UNEQUAL;
	bool order = true, set = true;
	for (int r = 0; r < na && set; r++) {
		if (a[r] != b[r])
			order = false;
		bool in = false;
		for (int k = 0; k < nb && !in; k++)
			in = b[k] == a[r];
		set = in;
	}
	return order ? same_result : set ? MPI_SIMILAR : MPI_UNEQUAL;
}

int MPI_Comm_compare(MPI_Comm comm1, MPI_Comm comm2, int *result)
{
	CHECK_INIT("MPI_Comm_compare");
	comm_t *a = pcori_mpi_comm(comm1), *b = pcori_mpi_comm(comm2);
	if (!a || !b)
		return FAIL(a ? comm2 : comm1, "MPI_Comm_compare",
			    MPI_ERR_COMM);
	if (!result)
		return FAIL(comm1, "MPI_Comm_compare", MPI_ERR_ARG);
	*result = a == b ? MPI_IDENT
			 : compare_lists(a->pids, a->size, b->pids, b->size,
					 MPI_CONGRUENT);
	return MPI_SUCCESS;
}

int MPI_Comm_free(MPI_Comm *comm)
{
	CHECK_INIT("MPI_Comm_free");
	comm_t *c = comm ? pcori_mpi_comm(*comm) : NULL;
	if (!c || *comm == MPI_COMM_WORLD || *comm == MPI_COMM_SELF)
		return FAIL(comm ? *comm : MPI_COMM_NULL, "MPI_Comm_free",
			    MPI_ERR_COMM);
	/* A delete callback that fails keeps the communicator. */
	int rc = pcori_mpi_attr_delete_all(*comm, c);
	if (rc)
		return FAIL(*comm, "MPI_Comm_free", rc);
	pcori_mpi_tab_del(&comms, HINDEX(*comm));
	comm_destroy(c);
	*comm = MPI_COMM_NULL;
	return MPI_SUCCESS;
}

int MPI_Comm_set_name(MPI_Comm comm, const char *comm_name)
{
	CHECK_INIT("MPI_Comm_set_name");
	comm_t *c = pcori_mpi_comm(comm);
	if (!c)
		return FAIL(comm, "MPI_Comm_set_name", MPI_ERR_COMM);
	if (!comm_name)
		return FAIL(comm, "MPI_Comm_set_name", MPI_ERR_ARG);
	size_t n = strnlen(comm_name, MPI_MAX_OBJECT_NAME - 1);
	memcpy(c->name, comm_name, n);
	c->name[n] = '\0';
	return MPI_SUCCESS;
}

int MPI_Comm_get_name(MPI_Comm comm, char *comm_name, int *resultlen)
{
	CHECK_INIT("MPI_Comm_get_name");
	comm_t *c = pcori_mpi_comm(comm);
	if (!c)
		return FAIL(comm, "MPI_Comm_get_name", MPI_ERR_COMM);
	if (!comm_name || !resultlen)
		return FAIL(comm, "MPI_Comm_get_name", MPI_ERR_ARG);
	strcpy(comm_name, c->name);
	*resultlen = (int)strlen(c->name);
	return MPI_SUCCESS;
}

/* --------------------------------------------------------------- groups */

static group_t empty_group = {.refs = 1, .size = 0};

group_t *pcori_mpi_group_new(int size)
{
	group_t *gr = calloc(1, sizeof(*gr));
	if (!gr)
		return NULL;
	gr->pids = malloc((size ? size : 1) * sizeof(int));
	if (!gr->pids) {
		free(gr);
		return NULL;
	}
	gr->refs = 1;
	gr->size = size;
	return gr;
}

int pcori_mpi_group_rank_of(const group_t *gr, int pid)
{
	for (int r = 0; r < gr->size; r++)
		if (gr->pids[r] == pid)
			return r;
	return MPI_UNDEFINED;
}

static group_t *group_get(MPI_Group g)
{
	if (HKIND(g) != GROUP_KIND)
		return NULL;
	if (HINDEX(g) == 0)
		return &empty_group;
	return pcori_mpi_tab_get(&groups, HINDEX(g));
}

/* A handle for gr (freed on failure). */
static int group_publish(group_t *gr, MPI_Group *out_p)
{
	if (gr->size == 0) {
		free(gr->pids);
		free(gr);
		*out_p = MPI_GROUP_EMPTY;
		return MPI_SUCCESS;
	}
	int i = pcori_mpi_tab_add(&groups, gr, 1);
	if (i < 0) {
		free(gr->pids);
		free(gr);
		return MPI_ERR_OTHER;
	}
	*out_p = (MPI_Group)(GROUP_KIND | (unsigned)i);
	return MPI_SUCCESS;
}

int MPI_Comm_group(MPI_Comm comm, MPI_Group *group)
{
	CHECK_INIT("MPI_Comm_group");
	comm_t *c = pcori_mpi_comm(comm);
	if (!c)
		return FAIL(comm, "MPI_Comm_group", MPI_ERR_COMM);
	if (!group)
		return FAIL(comm, "MPI_Comm_group", MPI_ERR_ARG);
	group_t *gr = pcori_mpi_group_new(c->size);
	if (!gr)
		return FAIL(comm, "MPI_Comm_group", MPI_ERR_OTHER);
	memcpy(gr->pids, c->pids, c->size * sizeof(int));
	RETURN(comm, "MPI_Comm_group", group_publish(gr, group));
}

int MPI_Group_size(MPI_Group group, int *size)
{
	CHECK_INIT("MPI_Group_size");
	group_t *gr = group_get(group);
	if (!gr || !size)
		return FAIL(MPI_COMM_WORLD, "MPI_Group_size",
			    gr ? MPI_ERR_ARG : MPI_ERR_GROUP);
	*size = gr->size;
	return MPI_SUCCESS;
}

int MPI_Group_rank(MPI_Group group, int *rank)
{
	CHECK_INIT("MPI_Group_rank");
	group_t *gr = group_get(group);
	if (!gr || !rank)
		return FAIL(MPI_COMM_WORLD, "MPI_Group_rank",
			    gr ? MPI_ERR_ARG : MPI_ERR_GROUP);
	*rank = pcori_mpi_group_rank_of(gr, pcori_mpi.pid);
	return MPI_SUCCESS;
}

int MPI_Group_free(MPI_Group *group)
{
	CHECK_INIT("MPI_Group_free");
	group_t *gr = group ? group_get(*group) : NULL;
	if (!gr)
		return FAIL(MPI_COMM_WORLD, "MPI_Group_free", MPI_ERR_GROUP);
	if (gr != &empty_group) {
		pcori_mpi_tab_del(&groups, HINDEX(*group));
		free(gr->pids);
		free(gr);
	}
	*group = MPI_GROUP_NULL;
	return MPI_SUCCESS;
}

int MPI_Group_translate_ranks(MPI_Group group1, int n, const int ranks1[],
			      MPI_Group group2, int ranks2[])
{
	CHECK_INIT("MPI_Group_translate_ranks");
	group_t *a = group_get(group1), *b = group_get(group2);
	if (!a || !b)
		return FAIL(MPI_COMM_WORLD, "MPI_Group_translate_ranks",
			    MPI_ERR_GROUP);
	if (n < 0 || (n && (!ranks1 || !ranks2)))
		return FAIL(MPI_COMM_WORLD, "MPI_Group_translate_ranks",
			    MPI_ERR_ARG);
	for (int k = 0; k < n; k++)
		if (ranks1[k] != MPI_PROC_NULL &&
		    (ranks1[k] < 0 || ranks1[k] >= a->size))
			return FAIL(MPI_COMM_WORLD, "MPI_Group_translate_ranks",
				    MPI_ERR_RANK);
	for (int k = 0; k < n; k++)
		ranks2[k] =
		    ranks1[k] == MPI_PROC_NULL
			? MPI_PROC_NULL
			: pcori_mpi_group_rank_of(b, a->pids[ranks1[k]]);
	return MPI_SUCCESS;
}

int MPI_Group_compare(MPI_Group group1, MPI_Group group2, int *result)
{
	CHECK_INIT("MPI_Group_compare");
	group_t *a = group_get(group1), *b = group_get(group2);
	if (!a || !b || !result)
		return FAIL(MPI_COMM_WORLD, "MPI_Group_compare",
			    result ? MPI_ERR_GROUP : MPI_ERR_ARG);
	*result = compare_lists(a->pids, a->size, b->pids, b->size, MPI_IDENT);
	return MPI_SUCCESS;
}

/* Members of gr picked by keep[r] (in the order of ranks, or of gr). */
static int group_pick(group_t *gr, int n, const int *ranks, MPI_Group *newgroup)
{
	group_t *ng = pcori_mpi_group_new(n);
	if (!ng)
		return MPI_ERR_OTHER;
	for (int k = 0; k < n; k++)
		ng->pids[k] = gr->pids[ranks[k]];
	return group_publish(ng, newgroup);
}

/* Whether ranks[0..n) are distinct valid ranks of gr. */
static bool ranks_ok(const group_t *gr, int n, const int *ranks)
{
	if (n < 0 || n > gr->size || (n && !ranks))
		return false;
	char *seen = calloc(gr->size + 1, 1);
	bool ok = seen != NULL;
	for (int k = 0; k < n && ok; k++) {
		ok = ranks[k] >= 0 && ranks[k] < gr->size && !seen[ranks[k]];
		if (ok)
			seen[ranks[k]] = 1;
	}
	free(seen);
	return ok;
}

int MPI_Group_incl(MPI_Group group, int n, const int ranks[],
		   MPI_Group *newgroup)
{
	CHECK_INIT("MPI_Group_incl");
	group_t *gr = group_get(group);
	if (!gr)
		return FAIL(MPI_COMM_WORLD, "MPI_Group_incl", MPI_ERR_GROUP);
	if (!ranks_ok(gr, n, ranks))
		return FAIL(MPI_COMM_WORLD, "MPI_Group_incl", MPI_ERR_RANK);
	if (!newgroup)
		return FAIL(MPI_COMM_WORLD, "MPI_Group_incl", MPI_ERR_ARG);
	RETURN(MPI_COMM_WORLD, "MPI_Group_incl",
	       group_pick(gr, n, ranks, newgroup));
}

int MPI_Group_excl(MPI_Group group, int n, const int ranks[],
		   MPI_Group *newgroup)
{
	CHECK_INIT("MPI_Group_excl");
	group_t *gr = group_get(group);
	if (!gr)
		return FAIL(MPI_COMM_WORLD, "MPI_Group_excl", MPI_ERR_GROUP);
	if (!ranks_ok(gr, n, ranks))
		return FAIL(MPI_COMM_WORLD, "MPI_Group_excl", MPI_ERR_RANK);
	if (!newgroup)
		return FAIL(MPI_COMM_WORLD, "MPI_Group_excl", MPI_ERR_ARG);
	int *keep = malloc((gr->size + 1) * sizeof(int)), m = 0;
	if (!keep)
		return FAIL(MPI_COMM_WORLD, "MPI_Group_excl", MPI_ERR_OTHER);
	for (int r = 0; r < gr->size; r++) {
		bool out = false;
		for (int k = 0; k < n && !out; k++)
			out = ranks[k] == r;
		if (!out)
			keep[m++] = r;
	}
	int err = group_pick(gr, m, keep, newgroup);
	free(keep);
	RETURN(MPI_COMM_WORLD, "MPI_Group_excl", err);
}

int MPI_Group_range_incl(MPI_Group group, int n, int ranges[][3],
			 MPI_Group *newgroup)
{
	CHECK_INIT("MPI_Group_range_incl");
	group_t *gr = group_get(group);
	if (!gr)
		return FAIL(MPI_COMM_WORLD, "MPI_Group_range_incl",
			    MPI_ERR_GROUP);
	if (n < 0 || (n && !ranges) || !newgroup)
		return FAIL(MPI_COMM_WORLD, "MPI_Group_range_incl",
			    MPI_ERR_ARG);
	int *list = malloc((gr->size + 1) * sizeof(int)), m = 0, err = 0;
	if (!list)
		return FAIL(MPI_COMM_WORLD, "MPI_Group_range_incl",
			    MPI_ERR_OTHER);
	for (int k = 0; k < n && !err; k++) {
		int first = ranges[k][0], last = ranges[k][1];
		int stride = ranges[k][2];
		if (stride == 0 || first < 0 || first >= gr->size || last < 0 ||
		    last >= gr->size) {
			err = MPI_ERR_RANK;
			break;
		}
		for (int r = first; stride > 0 ? r <= last : r >= last;
		     r += stride) {
			if (m == gr->size) {
				err = MPI_ERR_RANK; /* a rank twice */
				break;
			}
			list[m++] = r;
		}
	}
	if (!err && !ranks_ok(gr, m, list))
		err = MPI_ERR_RANK;
	if (!err)
		err = group_pick(gr, m, list, newgroup);
	free(list);
	RETURN(MPI_COMM_WORLD, "MPI_Group_range_incl", err);
}

int MPI_Comm_create(MPI_Comm comm, MPI_Group group, MPI_Comm *newcomm)
{
	CHECK_INIT("MPI_Comm_create");
	comm_t *c = pcori_mpi_comm(comm);
	if (!c)
		return FAIL(comm, "MPI_Comm_create", MPI_ERR_COMM);
	group_t *gr = group_get(group);
	if (!gr)
		return FAIL(comm, "MPI_Comm_create", MPI_ERR_GROUP);
	if (!newcomm)
		return FAIL(comm, "MPI_Comm_create", MPI_ERR_ARG);
	for (int r = 0; r < gr->size; r++)
		if (c->rank_of[gr->pids[r]] < 0)
			return FAIL(comm, "MPI_Comm_create", MPI_ERR_GROUP);
	/* Collective over comm: every member agrees on the id. */
	uint32_t id;
	int rc = pcori_mpi_agree_ctx(c, &id);
	if (rc)
		return FAIL(comm, "MPI_Comm_create", rc);
	if (pcori_mpi_group_rank_of(gr, pcori_mpi.pid) == MPI_UNDEFINED) {
		*newcomm = MPI_COMM_NULL;
		return MPI_SUCCESS;
	}
	int *pids = malloc(gr->size * sizeof(int));
	if (!pids)
		return FAIL(comm, "MPI_Comm_create", MPI_ERR_OTHER);
	memcpy(pids, gr->pids, gr->size * sizeof(int));
	RETURN(comm, "MPI_Comm_create",
	       comm_derive(c, pids, gr->size, id, newcomm));
}
