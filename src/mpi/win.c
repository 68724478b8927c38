/*
 * win.c -- windows for one-sided communication: creation, allocation,
 * dynamic attachment, fence and free.  The data movement calls (Put,
 * Get, Accumulate) and passive-target locks are not implemented and so
 * not declared; with no RMA operation to order, a fence is a barrier.
 */
#include <stdlib.h>

#include "mpii.h"

typedef struct win {
	MPI_Comm comm; /* a private duplicate: its own matching contexts */
	void *base;
	MPI_Aint size;
	int disp_unit;
	bool owned;   /* base came from MPI_Win_allocate */
	bool dynamic; /* memory comes through MPI_Win_attach */
	MPI_Errhandler eh;
} win_t;

/* Errors on a window go through its own handler (fatal by default). */
static int win_fail(const win_t *w, const char *fn, int err)
{
	if (w && w->eh == MPI_ERRORS_RETURN)
		return err;
	return FAIL(MPI_COMM_NULL, fn, err);
}

static htable_t wins;

static win_t *win_get(MPI_Win w)
{
	if (HKIND(w) != WIN_KIND)
		return NULL;
	return pcori_mpi_tab_get(&wins, HINDEX(w));
}

/* The collective part of every creation: a window over a dup of comm. */
static int win_make(const char *fn, void *base, MPI_Aint size, int disp_unit,
		    MPI_Comm comm, bool owned, bool dynamic, MPI_Win *win)
{
	if (!pcori_mpi_comm(comm))
		return FAIL(comm, fn, MPI_ERR_COMM);
	if (size < 0 || disp_unit <= 0 || !win || (size && !base && !dynamic))
		return FAIL(comm, fn, MPI_ERR_ARG);
	win_t *w = calloc(1, sizeof(*w));
	if (!w)
		return FAIL(comm, fn, MPI_ERR_OTHER);
	int rc = MPI_Comm_dup(comm, &w->comm);
	if (rc) {
		free(w);
		return rc;
	}
	w->base = base;
	w->size = size;
	w->disp_unit = disp_unit;
	w->owned = owned;
	w->dynamic = dynamic;
	w->eh = MPI_ERRORS_ARE_FATAL;
	int i = pcori_mpi_tab_add(&wins, w, 1);
	if (i < 0) {
		MPI_Comm_free(&w->comm);
		free(w);
		return FAIL(comm, fn, MPI_ERR_OTHER);
	}
	*win = (MPI_Win)(WIN_KIND | (unsigned)i);
	return MPI_SUCCESS;
}

int MPI_Win_create(void *base, MPI_Aint size, int disp_unit, MPI_Info info,
		   MPI_Comm comm, MPI_Win *win)
{
	CHECK_INIT("MPI_Win_create");
	(void)info;
	return win_make("MPI_Win_create", base, size, disp_unit, comm, false,
			false, win);
}

int MPI_Win_allocate(MPI_Aint size, int disp_unit, MPI_Info info, MPI_Comm comm,
		     void *baseptr, MPI_Win *win)
{
	CHECK_INIT("MPI_Win_allocate");
	(void)info;
	if (size < 0 || !baseptr)
		return FAIL(comm, "MPI_Win_allocate", MPI_ERR_ARG);
	void *p = malloc(size ? (size_t)size : 1);
	if (!p)
		return FAIL(comm, "MPI_Win_allocate", MPI_ERR_OTHER);
	int rc = win_make("MPI_Win_allocate", p, size, disp_unit, comm, true,
			  false, win);
	if (rc)
		free(p);
	else
		*(void **)baseptr = p;
	return rc;
}

int MPI_Win_create_dynamic(MPI_Info info, MPI_Comm comm, MPI_Win *win)
{
	CHECK_INIT("MPI_Win_create_dynamic");
	(void)info;
	return win_make("MPI_Win_create_dynamic", NULL, 0, 1, comm, false, true,
			win);
}

int MPI_Win_attach(MPI_Win win, void *base, MPI_Aint size)
{
	CHECK_INIT("MPI_Win_attach");
	win_t *w = win_get(win);
	if (!w)
		return FAIL(MPI_COMM_WORLD, "MPI_Win_attach", MPI_ERR_WIN);
	if (!w->dynamic || size < 0 || (size && !base))
		return win_fail(w, "MPI_Win_attach", MPI_ERR_ARG);
	return MPI_SUCCESS; /* addresses are used as they are */
}

int MPI_Win_detach(MPI_Win win, const void *base)
{
	CHECK_INIT("MPI_Win_detach");
	win_t *w = win_get(win);
	if (!w)
		return FAIL(MPI_COMM_WORLD, "MPI_Win_detach", MPI_ERR_WIN);
	if (!w->dynamic || !base)
		return win_fail(w, "MPI_Win_detach", MPI_ERR_ARG);
	return MPI_SUCCESS;
}

int MPI_Win_fence(int assert, MPI_Win win)
{
	CHECK_INIT("MPI_Win_fence");
	(void)assert;
	win_t *w = win_get(win);
	if (!w)
		return FAIL(MPI_COMM_WORLD, "MPI_Win_fence", MPI_ERR_WIN);
	return MPI_Barrier(w->comm);
}

int MPI_Win_free(MPI_Win *win)
{
	CHECK_INIT("MPI_Win_free");
	win_t *w = win ? win_get(*win) : NULL;
	if (!w)
		return FAIL(MPI_COMM_WORLD, "MPI_Win_free", MPI_ERR_WIN);
	/* Collective: nobody frees while another may still use it. */
	int rc = MPI_Barrier(w->comm);
	if (rc)
		return rc;
	pcori_mpi_tab_del(&wins, HINDEX(*win));
	MPI_Comm_free(&w->comm);
	if (w->owned)
		free(w->base);
	free(w);
	*win = MPI_WIN_NULL;
	return MPI_SUCCESS;
}

int MPI_Win_set_errhandler(MPI_Win win, MPI_Errhandler errhandler)
{
	CHECK_INIT("MPI_Win_set_errhandler");
	win_t *w = win_get(win);
	if (!w)
		return FAIL(MPI_COMM_WORLD, "MPI_Win_set_errhandler",
			    MPI_ERR_WIN);
	if (errhandler != MPI_ERRORS_RETURN &&
	    errhandler != MPI_ERRORS_ARE_FATAL)
		return win_fail(w, "MPI_Win_set_errhandler", MPI_ERR_ARG);
	w->eh = errhandler;
	return MPI_SUCCESS;
}
