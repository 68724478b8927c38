/*
 * attr.c -- attribute caching on communicators: keyvals, the attributes
 * set with them, and the predefined attributes of MPI_Comm_get_attr.
 *
 * A keyval holds its callbacks and extra state.  It stays in the table
 * (so its handle is never reused) until MPI_Comm_free_keyval has been
 * called and no attribute holds it any more: attributes set before the
 * keyval was freed keep their callbacks, as the standard requires.
 *
 * A communicator's attributes are an array in the order they were first
 * set.  MPI_Comm_dup copies them in that order; MPI_Comm_free and
 * MPI_Finalize (for MPI_COMM_SELF) delete them in the reverse order.
 * Callbacks run without any lock held, so they may call MPI (even set or
 * delete attributes of the communicator they were called for).
 */
#include <stdlib.h>
#include <string.h>

#include "mpii.h"

typedef struct keyval {
	MPI_Comm_copy_attr_function *copy;  /* NULL: never copied */
	MPI_Comm_delete_attr_function *del; /* NULL: nothing to do */
	void *extra;
	int handle;
	int refs;   /* the handle until freed, plus one per holder */
	bool freed; /* MPI_Comm_free_keyval was called */
} keyval_t;

struct attr {
	keyval_t *k;
	void *val;
};

/*
 * Guards every keyval's refs and freed, and every communicator's
 * attribute array (attrs, nattr, attrcap).  Taken before pcori_mpi.lock
 * (the table's); never held while a callback runs.
 */
static pthread_mutex_t attr_lock = PTHREAD_MUTEX_INITIALIZER;
static htable_t keyvals;

/* Keyval of handle h, freed or not; NULL if there is none.  Lock held. */
static keyval_t *kv_get(int h)
{
	if (HKIND(h) != KEYVAL_KIND || HINDEX(h) == 0)
		return NULL;
	return pcori_mpi_tab_get(&keyvals, HINDEX(h));
}

/* Drop one reference of k; the last one frees it.  Lock held. */
static void kv_unref(keyval_t *k)
{
	if (--k->refs == 0) {
		pcori_mpi_tab_del(&keyvals, HINDEX(k->handle));
		free(k);
	}
}

/* Index of k's attribute on c, or -1.  Lock held. */
static int find(const comm_t *c, const keyval_t *k)
{
	for (int i = 0; i < c->nattr; i++)
		if (c->attrs[i].k == k)
			return i;
	return -1;
}

/* Add or replace k's attribute on c.  Lock held. */
static int put(comm_t *c, keyval_t *k, void *val)
{
	int i = find(c, k);
	if (i >= 0) {
		c->attrs[i].val = val;
		return MPI_SUCCESS;
	}
	if (c->nattr == c->attrcap) {
		int n = c->attrcap ? 2 * c->attrcap : 4;
		struct attr *a = realloc(c->attrs, n * sizeof(*a));
		if (!a)
			return MPI_ERR_OTHER;
		c->attrs = a;
		c->attrcap = n;
	}
	c->attrs[c->nattr++] = (struct attr){k, val};
	k->refs++;
	return MPI_SUCCESS;
}

/*
 * Remove k's attribute from c, if it is there, then drop the caller's
 * own reference to k (taken while the lock was dropped).  Lock held.
 */
static void take_unref(comm_t *c, keyval_t *k)
{
	int i = find(c, k);
	if (i >= 0) {
		memmove(&c->attrs[i], &c->attrs[i + 1],
			(c->nattr - i - 1) * sizeof(c->attrs[0]));
		c->nattr--;
		k->refs--; /* not the last: the caller holds one */
	}
	kv_unref(k);
}

/* Run k's delete callback for value val of communicator h. */
static int run_delete(MPI_Comm h, keyval_t *k, void *val)
{
	return k->del ? k->del(h, k->handle, val, k->extra) : MPI_SUCCESS;
}

int pcor_mpi_comm_null_copy_fn_(MPI_Comm oldcomm, int comm_keyval,
				void *extra_state, void *attribute_val_in,
				void *attribute_val_out, int *flag)
{
	(void)oldcomm, (void)comm_keyval, (void)extra_state;
	(void)attribute_val_in, (void)attribute_val_out;
	*flag = 0;
	return MPI_SUCCESS;
}

int pcor_mpi_comm_dup_fn_(MPI_Comm oldcomm, int comm_keyval, void *extra_state,
			  void *attribute_val_in, void *attribute_val_out,
			  int *flag)
{
	(void)oldcomm, (void)comm_keyval, (void)extra_state;
	*(void **)attribute_val_out = attribute_val_in;
	*flag = 1;
	return MPI_SUCCESS;
}

int pcor_mpi_comm_null_delete_fn_(MPI_Comm comm, int comm_keyval,
				  void *attribute_val, void *extra_state)
{
	(void)comm, (void)comm_keyval, (void)attribute_val, (void)extra_state;
	return MPI_SUCCESS;
}

int MPI_Comm_create_keyval(MPI_Comm_copy_attr_function *comm_copy_attr_fn,
			   MPI_Comm_delete_attr_function *comm_delete_attr_fn,
			   int *comm_keyval, void *extra_state)
{
	CHECK_INIT("MPI_Comm_create_keyval");
	if (!comm_keyval)
		return FAIL(MPI_COMM_WORLD, "MPI_Comm_create_keyval",
			    MPI_ERR_ARG);
	keyval_t *k = calloc(1, sizeof(*k));
	if (!k)
		return FAIL(MPI_COMM_WORLD, "MPI_Comm_create_keyval",
			    MPI_ERR_OTHER);
	k->copy = comm_copy_attr_fn;
	k->del = comm_delete_attr_fn;
	k->extra = extra_state;
	k->refs = 1;
	/* Slot 0 stays empty: its handle is MPI_KEYVAL_INVALID. */
	int i = pcori_mpi_tab_add(&keyvals, k, 1);
	if (i < 0) {
		free(k);
		return FAIL(MPI_COMM_WORLD, "MPI_Comm_create_keyval",
			    MPI_ERR_OTHER);
	}
	k->handle = (int)(KEYVAL_KIND | (unsigned)i);
	*comm_keyval = k->handle;
	return MPI_SUCCESS;
}

int MPI_Comm_free_keyval(int *comm_keyval)
{
	CHECK_INIT("MPI_Comm_free_keyval");
	if (!comm_keyval)
		return FAIL(MPI_COMM_WORLD, "MPI_Comm_free_keyval",
			    MPI_ERR_ARG);
	pthread_mutex_lock(&attr_lock);
	keyval_t *k = kv_get(*comm_keyval);
	bool ok = k && !k->freed;
	if (ok) {
		k->freed = true;
		kv_unref(k);
	}
	pthread_mutex_unlock(&attr_lock);
	if (!ok)
		return FAIL(MPI_COMM_WORLD, "MPI_Comm_free_keyval",
			    MPI_ERR_KEYVAL);
	*comm_keyval = MPI_KEYVAL_INVALID;
	return MPI_SUCCESS;
}

int MPI_Comm_set_attr(MPI_Comm comm, int comm_keyval, void *attribute_val)
{
	CHECK_INIT("MPI_Comm_set_attr");
	comm_t *c = pcori_mpi_comm(comm);
	if (!c)
		return FAIL(comm, "MPI_Comm_set_attr", MPI_ERR_COMM);
	pthread_mutex_lock(&attr_lock);
	keyval_t *k = kv_get(comm_keyval);
	if (!k || k->freed) {
		pthread_mutex_unlock(&attr_lock);
		return FAIL(comm, "MPI_Comm_set_attr", MPI_ERR_KEYVAL);
	}
	int i = find(c, k), err = MPI_SUCCESS;
	k->refs++; /* k stays while the lock is dropped */
	if (i >= 0) {
		/* The old value goes first; if it will not, nothing changes. */
		void *old = c->attrs[i].val;
		pthread_mutex_unlock(&attr_lock);
		err = run_delete(comm, k, old);
		pthread_mutex_lock(&attr_lock);
	}
	if (!err)
		err = put(c, k, attribute_val);
	kv_unref(k);
	pthread_mutex_unlock(&attr_lock);
	RETURN(comm, "MPI_Comm_set_attr", err);
}

int MPI_Comm_delete_attr(MPI_Comm comm, int comm_keyval)
{
	CHECK_INIT("MPI_Comm_delete_attr");
	comm_t *c = pcori_mpi_comm(comm);
	if (!c)
		return FAIL(comm, "MPI_Comm_delete_attr", MPI_ERR_COMM);
	pthread_mutex_lock(&attr_lock);
	keyval_t *k = kv_get(comm_keyval);
	int i = k ? find(c, k) : -1;
	if (i < 0) {
		pthread_mutex_unlock(&attr_lock);
		return FAIL(comm, "MPI_Comm_delete_attr", MPI_ERR_KEYVAL);
	}
	void *val = c->attrs[i].val;
	k->refs++;
	pthread_mutex_unlock(&attr_lock);
	int err = run_delete(comm, k, val);
	pthread_mutex_lock(&attr_lock);
	if (err)
		kv_unref(k);
	else
		take_unref(c, k);
	pthread_mutex_unlock(&attr_lock);
	RETURN(comm, "MPI_Comm_delete_attr", err);
}

int MPI_Comm_get_attr(MPI_Comm comm, int comm_keyval, void *attribute_val,
		      int *flag)
{
	CHECK_INIT("MPI_Comm_get_attr");
	/* Constants of the job: written once, read by any thread. */
	static int tag_ub = TAG_UB, wtime_global = 0, host = MPI_PROC_NULL;
	static int io = MPI_ANY_SOURCE, appnum = 0, universe;
	comm_t *c = pcori_mpi_comm(comm);
	if (!c)
		return FAIL(comm, "MPI_Comm_get_attr", MPI_ERR_COMM);
	if (!attribute_val || !flag)
		return FAIL(comm, "MPI_Comm_get_attr", MPI_ERR_ARG);
	*flag = 1;
	switch (comm_keyval) {
	case MPI_TAG_UB:
		*(int **)attribute_val = &tag_ub;
		return MPI_SUCCESS;
	case MPI_WTIME_IS_GLOBAL:
		*(int **)attribute_val = &wtime_global;
		return MPI_SUCCESS;
	case MPI_HOST: /* no process is special */
		*(int **)attribute_val = &host;
		return MPI_SUCCESS;
	case MPI_IO: /* every process can do I/O */
		*(int **)attribute_val = &io;
		return MPI_SUCCESS;
	case MPI_APPNUM:
		*(int **)attribute_val = &appnum;
		return MPI_SUCCESS;
	case MPI_UNIVERSE_SIZE:
		universe = pcori_mpi.nprocs;
		*(int **)attribute_val = &universe;
		return MPI_SUCCESS;
	}
	pthread_mutex_lock(&attr_lock);
	keyval_t *k = kv_get(comm_keyval);
	int i = k ? find(c, k) : -1;
	if (i >= 0)
		*(void **)attribute_val = c->attrs[i].val;
	pthread_mutex_unlock(&attr_lock);
	*flag = i >= 0; /* an unknown key is not set, not an error */
	return MPI_SUCCESS;
}

int pcori_mpi_attr_copy(MPI_Comm oldh, comm_t *old, comm_t *new)
{
	/* A snapshot, each keyval held, so the callbacks run unlocked. */
	pthread_mutex_lock(&attr_lock);
	int n = old->nattr;
	struct attr *snap = malloc((n ? n : 1) * sizeof(*snap));
	if (!snap) {
		pthread_mutex_unlock(&attr_lock);
		return MPI_ERR_OTHER;
	}
	for (int i = 0; i < n; i++) {
		snap[i] = old->attrs[i];
		snap[i].k->refs++;
	}
	pthread_mutex_unlock(&attr_lock);
	int err = MPI_SUCCESS;
	for (int i = 0; i < n && !err; i++) {
		keyval_t *k = snap[i].k;
		void *out = NULL;
		int flag = 0;
		if (k->copy)
			err = k->copy(oldh, k->handle, k->extra, snap[i].val,
				      &out, &flag);
		if (!err && flag) {
			pthread_mutex_lock(&attr_lock);
			err = put(new, k, out);
			pthread_mutex_unlock(&attr_lock);
		}
	}
	pthread_mutex_lock(&attr_lock);
	for (int i = 0; i < n; i++)
		kv_unref(snap[i].k);
	pthread_mutex_unlock(&attr_lock);
	free(snap);
	return err;
}

int pcori_mpi_attr_delete_all(MPI_Comm h, comm_t *c)
{
	for (;;) {
		pthread_mutex_lock(&attr_lock);
		if (!c->nattr) {
			pthread_mutex_unlock(&attr_lock);
			return MPI_SUCCESS;
		}
		struct attr a = c->attrs[c->nattr - 1];
		a.k->refs++;
		pthread_mutex_unlock(&attr_lock);
		int err = run_delete(h, a.k, a.val);
		pthread_mutex_lock(&attr_lock);
		if (err)
			kv_unref(a.k);
		else
			take_unref(c, a.k);
		pthread_mutex_unlock(&attr_lock);
		if (err)
			return err; /* the rest stay, and so does c */
	}
}

void pcori_mpi_attr_drop(comm_t *c)
{
	pthread_mutex_lock(&attr_lock);
	for (int i = 0; i < c->nattr; i++)
		kv_unref(c->attrs[i].k);
	pthread_mutex_unlock(&attr_lock);
	free(c->attrs);
	c->attrs = NULL;
	c->nattr = c->attrcap = 0;
}

void pcori_mpi_attr_fini(void)
{
	/* Keyvals the program never freed (no attribute holds one now). */
	for (int i = 1; i < keyvals.nslots; i++) {
		keyval_t *k = pcori_mpi_tab_get(&keyvals, i);
		if (k) {
			pcori_mpi_tab_del(&keyvals, i);
			free(k);
		}
	}
}
