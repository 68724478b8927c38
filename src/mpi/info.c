/*
 * info.c -- info objects: ordered (key, value) string pairs.  Nothing in
 * the shim reads them; programs may create, fill and query them.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>

#include "mpii.h"

typedef struct info {
	int n, cap;
	char **keys, **vals;
} info_t;

static htable_t infos;

static info_t *info_get(MPI_Info i)
{
	if (HKIND(i) != INFO_KIND)
		return NULL;
	return pcori_mpi_tab_get(&infos, HINDEX(i));
}

static int find(const info_t *in, const char *key)
{
	for (int k = 0; k < in->n; k++)
		if (!strcmp(in->keys[k], key))
			return k;
	return -1;
}

int MPI_Info_create(MPI_Info *info)
{
	CHECK_INIT("MPI_Info_create");
	if (!info)
		return FAIL(MPI_COMM_WORLD, "MPI_Info_create", MPI_ERR_ARG);
	info_t *in = calloc(1, sizeof(*in));
	/* Slot 0 stays unused: MPI_INFO_NULL has index 0. */
	int i = in ? pcori_mpi_tab_add(&infos, in, 1) : -1;
	if (i < 0) {
		free(in);
		return FAIL(MPI_COMM_WORLD, "MPI_Info_create", MPI_ERR_OTHER);
	}
	*info = (MPI_Info)(INFO_KIND | (unsigned)i);
	return MPI_SUCCESS;
}

int MPI_Info_set(MPI_Info info, const char *key, const char *value)
{
	CHECK_INIT("MPI_Info_set");
	info_t *in = info_get(info);
	if (!in)
		return FAIL(MPI_COMM_WORLD, "MPI_Info_set", MPI_ERR_INFO);
	if (!key || !*key || strlen(key) >= MPI_MAX_INFO_KEY)
		return FAIL(MPI_COMM_WORLD, "MPI_Info_set", MPI_ERR_INFO_KEY);
	if (!value || strlen(value) >= MPI_MAX_INFO_VAL)
		return FAIL(MPI_COMM_WORLD, "MPI_Info_set", MPI_ERR_INFO_VALUE);
	char *v = strdup(value);
	if (!v)
		return FAIL(MPI_COMM_WORLD, "MPI_Info_set", MPI_ERR_OTHER);
	int k = find(in, key);
	if (k >= 0) {
		free(in->vals[k]);
		in->vals[k] = v;
		return MPI_SUCCESS;
	}
	if (in->n == in->cap) {
		int n = in->cap ? 2 * in->cap : 4;
		char **ks = realloc(in->keys, n * sizeof(*ks));
		if (ks)
			in->keys = ks;
		char **vs = ks ? realloc(in->vals, n * sizeof(*vs)) : NULL;
		if (!vs) {
			free(v);
			return FAIL(MPI_COMM_WORLD, "MPI_Info_set",
				    MPI_ERR_OTHER);
		}
		in->vals = vs;
		in->cap = n;
	}
	char *kd = strdup(key);
	if (!kd) {
		free(v);
		return FAIL(MPI_COMM_WORLD, "MPI_Info_set", MPI_ERR_OTHER);
	}
	in->keys[in->n] = kd;
	in->vals[in->n++] = v;
	return MPI_SUCCESS;
}

int MPI_Info_get(MPI_Info info, const char *key, int valuelen, char *value,
		 int *flag)
{
	CHECK_INIT("MPI_Info_get");
	info_t *in = info_get(info);
	if (!in)
		return FAIL(MPI_COMM_WORLD, "MPI_Info_get", MPI_ERR_INFO);
	if (!key || !*key || strlen(key) >= MPI_MAX_INFO_KEY)
		return FAIL(MPI_COMM_WORLD, "MPI_Info_get", MPI_ERR_INFO_KEY);
	if (valuelen < 0 || !value || !flag)
		return FAIL(MPI_COMM_WORLD, "MPI_Info_get", MPI_ERR_ARG);
	int k = find(in, key);
	*flag = k >= 0;
	if (k >= 0) {
		/* At most valuelen characters, then the terminator. */
		size_t n = strlen(in->vals[k]);
		if (n > (size_t)valuelen)
			n = (size_t)valuelen;
		memcpy(value, in->vals[k], n);
		value[n] = '\0';
	}
	return MPI_SUCCESS;
}

int MPI_Info_get_nkeys(MPI_Info info, int *nkeys)
{
	CHECK_INIT("MPI_Info_get_nkeys");
	info_t *in = info_get(info);
	if (!in || !nkeys)
		return FAIL(MPI_COMM_WORLD, "MPI_Info_get_nkeys",
			    in ? MPI_ERR_ARG : MPI_ERR_INFO);
	*nkeys = in->n;
	return MPI_SUCCESS;
}

int MPI_Info_get_nthkey(MPI_Info info, int n, char *key)
{
	CHECK_INIT("MPI_Info_get_nthkey");
	info_t *in = info_get(info);
	if (!in)
		return FAIL(MPI_COMM_WORLD, "MPI_Info_get_nthkey",
			    MPI_ERR_INFO);
	if (n < 0 || n >= in->n || !key)
		return FAIL(MPI_COMM_WORLD, "MPI_Info_get_nthkey", MPI_ERR_ARG);
	strcpy(key, in->keys[n]);
	return MPI_SUCCESS;
}

int MPI_Info_delete(MPI_Info info, const char *key)
{
	CHECK_INIT("MPI_Info_delete");
	info_t *in = info_get(info);
	if (!in)
		return FAIL(MPI_COMM_WORLD, "MPI_Info_delete", MPI_ERR_INFO);
	int k = key ? find(in, key) : -1;
	if (k < 0)
		return FAIL(MPI_COMM_WORLD, "MPI_Info_delete",
			    MPI_ERR_INFO_NOKEY);
	free(in->keys[k]);
	free(in->vals[k]);
	memmove(&in->keys[k], &in->keys[k + 1],
		(in->n - k - 1) * sizeof(char *));
	memmove(&in->vals[k], &in->vals[k + 1],
		(in->n - k - 1) * sizeof(char *));
	in->n--;
	return MPI_SUCCESS;
}

int MPI_Info_free(MPI_Info *info)
{
	CHECK_INIT("MPI_Info_free");
	info_t *in = info ? info_get(*info) : NULL;
	if (!in)
		return FAIL(MPI_COMM_WORLD, "MPI_Info_free", MPI_ERR_INFO);
	pcori_mpi_tab_del(&infos, HINDEX(*info));
	for (int k = 0; k < in->n; k++) {
		free(in->keys[k]);
		free(in->vals[k]);
	}
	free(in->keys);
	free(in->vals);
	free(in);
	*info = MPI_INFO_NULL;
	return MPI_SUCCESS;
}

int MPI_Info_dup(MPI_Info info, MPI_Info *newinfo)
{
	CHECK_INIT("MPI_Info_dup");
	info_t *in = info_get(info);
	if (!in || !newinfo)
		return FAIL(MPI_COMM_WORLD, "MPI_Info_dup",
			    in ? MPI_ERR_ARG : MPI_ERR_INFO);
	int rc = MPI_Info_create(newinfo);
	for (int k = 0; k < in->n && rc == MPI_SUCCESS; k++)
		rc = MPI_Info_set(*newinfo, in->keys[k], in->vals[k]);
	return rc;
}
