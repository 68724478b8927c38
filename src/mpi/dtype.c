/*
 * dtype.c -- datatypes: the predefined ones and derived types.
 *
 * A derived type is flattened when it is built: the list of byte runs of
 * one element (offset from the element's start, length), in type-map
 * order, adjacent runs merged.  Sending packs the runs into one buffer
 * (or sends in place when the whole message is one run); receiving
 * unpacks.  Constructors keep their arguments for Type_get_contents.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpii.h"

#define NPREDEF 0x1d
static dtype_t predef[NPREDEF];
static htable_t types;

/* The predefined type's primitive element size (pairs count as one). */
static size_t predef_size(MPI_Datatype t)
{
	return ((unsigned)t >> 8) & 0xff;
}

void pcori_mpi_types_init(void)
{
	for (unsigned i = 1; i < NPREDEF; i++) {
		dtype_t *d = &predef[i];
		/* The handle encodes the size: find it among the defined. */
		static const MPI_Datatype all[] = {
		    MPI_CHAR,	       MPI_SIGNED_CHAR, MPI_UNSIGNED_CHAR,
		    MPI_BYTE,	       MPI_SHORT,	MPI_UNSIGNED_SHORT,
		    MPI_INT,	       MPI_UNSIGNED,	MPI_LONG,
		    MPI_UNSIGNED_LONG, MPI_LONG_LONG,	MPI_UNSIGNED_LONG_LONG,
		    MPI_FLOAT,	       MPI_DOUBLE,	MPI_INT8_T,
		    MPI_UINT8_T,       MPI_INT16_T,	MPI_UINT16_T,
		    MPI_INT32_T,       MPI_UINT32_T,	MPI_INT64_T,
		    MPI_UINT64_T,      MPI_C_BOOL,	MPI_AINT,
		    MPI_2INT,	       MPI_FLOAT_INT,	MPI_DOUBLE_INT,
		    MPI_LONG_INT};
		static const char *const names[] = {
		    "MPI_CHAR",		 "MPI_SIGNED_CHAR",
		    "MPI_UNSIGNED_CHAR", "MPI_BYTE",
		    "MPI_SHORT",	 "MPI_UNSIGNED_SHORT",
		    "MPI_INT",		 "MPI_UNSIGNED",
		    "MPI_LONG",		 "MPI_UNSIGNED_LONG",
		    "MPI_LONG_LONG",	 "MPI_UNSIGNED_LONG_LONG",
		    "MPI_FLOAT",	 "MPI_DOUBLE",
		    "MPI_INT8_T",	 "MPI_UINT8_T",
		    "MPI_INT16_T",	 "MPI_UINT16_T",
		    "MPI_INT32_T",	 "MPI_UINT32_T",
		    "MPI_INT64_T",	 "MPI_UINT64_T",
		    "MPI_C_BOOL",	 "MPI_AINT",
		    "MPI_2INT",		 "MPI_FLOAT_INT",
		    "MPI_DOUBLE_INT",	 "MPI_LONG_INT"};
		MPI_Datatype t = all[i - 1];
		static blk_t runs[NPREDEF];
		size_t sz = predef_size(t);
		runs[i] = (blk_t){0, sz};
		*d = (dtype_t){.refs = 1,
			       .committed = true,
			       .predef = true,
			       .size = sz,
			       .extent = (MPI_Aint)sz,
			       .true_ub = (MPI_Aint)sz,
			       .prim = t,
			       .nprim = 1,
			       .nblk = 1,
			       .blk = &runs[i],
			       .combiner = MPI_COMBINER_NAMED};
		snprintf(d->name, sizeof(d->name), "%s", names[i - 1]);
	}
}

static void dt_destroy(dtype_t *d)
{
	free(d->blk);
	free(d->ints);
	free(d->aints);
	free(d->types);
	free(d);
}

void pcori_mpi_types_fini(void)
{
	for (int i = 0; i < types.nslots; i++) {
		dtype_t *d = pcori_mpi_tab_get(&types, i);
		if (d) {
			pcori_mpi_tab_del(&types, i);
			dt_destroy(d);
		}
	}
}

dtype_t *pcori_mpi_type(MPI_Datatype t)
{
	unsigned u = (unsigned)t;
	if (HKIND(t) == DTYPE_KIND)
		return pcori_mpi_tab_get(&types, HINDEX(t));
	if ((u & 0xffff0000u) != 0x4c000000u)
		return NULL;
	unsigned i = u & 0xff;
	if (i < 1 || i >= NPREDEF || predef[i].prim != t)
		return NULL;
	return &predef[i];
}

dtype_t *pcori_mpi_type_ready(MPI_Datatype t)
{
	dtype_t *d = pcori_mpi_type(t);
	return d && d->committed ? d : NULL;
}

bool pcori_mpi_type_contig(const dtype_t *d, int count, MPI_Aint *off_p)
{
	if (d->nblk == 0 || count == 0) {
		*off_p = 0;
		return true;
	}
	if (d->nblk != 1 || (count > 1 && (MPI_Aint)d->blk[0].len != d->extent))
		return false;
	*off_p = d->blk[0].off;
	return true;
}

void pcori_mpi_pack(const void *buf, int count, const dtype_t *d, void *out)
{
	char *o = out;
	for (int i = 0; i < count; i++) {
		const char *base = (const char *)buf + (MPI_Aint)i * d->extent;
		for (int b = 0; b < d->nblk; b++) {
			memcpy(o, base + d->blk[b].off, d->blk[b].len);
			o += d->blk[b].len;
		}
	}
}

void pcori_mpi_unpack(const void *in, size_t bytes, void *buf, int count,
		      const dtype_t *d)
{
	const char *p = in;
	for (int i = 0; i < count && bytes; i++) {
		char *base = (char *)buf + (MPI_Aint)i * d->extent;
		for (int b = 0; b < d->nblk && bytes; b++) {
			size_t n =
			    d->blk[b].len < bytes ? d->blk[b].len : bytes;
			memcpy(base + d->blk[b].off, p, n);
			p += n;
			bytes -= n;
		}
	}
}

/* ---------------------------------------------------------- construction */

/* Append a run, merged with the last one when they touch. */
static int dt_run(dtype_t *d, int *cap, MPI_Aint off, size_t len)
{
	if (!len)
		return 0;
	if (d->nblk &&
	    d->blk[d->nblk - 1].off + (MPI_Aint)d->blk[d->nblk - 1].len ==
		off) {
		d->blk[d->nblk - 1].len += len;
		return 0;
	}
	if (d->nblk == *cap) {
		int n = *cap ? 2 * *cap : 8;
		blk_t *b = realloc(d->blk, n * sizeof(*b));
		if (!b)
			return -1;
		d->blk = b;
		*cap = n;
	}
	d->blk[d->nblk++] = (blk_t){off, len};
	return 0;
}

/*
 * Build a type of n pieces: piece k is bl[k] consecutive elements of
 * kids[k] starting disp[k] bytes from the new element's origin.
 */
static int dt_build(int n, dtype_t *const *kids, const MPI_Aint *disp,
		    const int *bl, dtype_t **out_p)
{
	dtype_t *d = calloc(1, sizeof(*d));
	if (!d)
		return MPI_ERR_OTHER;
	int cap = 0;
	bool any = false, mixed = false;
	MPI_Aint lb = 0, ub = 0, tlb = 0, tub = 0;
	for (int k = 0; k < n; k++) {
		const dtype_t *c = kids[k];
		for (int e = 0; e < bl[k]; e++) {
			MPI_Aint at = disp[k] + (MPI_Aint)e * c->extent;
			for (int b = 0; b < c->nblk; b++)
				if (dt_run(d, &cap, at + c->blk[b].off,
					   c->blk[b].len)) {
					dt_destroy(d);
					return MPI_ERR_OTHER;
				}
		}
		if (!bl[k])
			continue;
		MPI_Aint first = disp[k],
			 last = disp[k] + (MPI_Aint)(bl[k] - 1) * c->extent;
		MPI_Aint lo = (first < last ? first : last) + c->lb;
		MPI_Aint hi = (first < last ? last : first) + c->lb + c->extent;
		MPI_Aint tlo = (first < last ? first : last) + c->true_lb;
		MPI_Aint thi = (first < last ? last : first) + c->true_ub;
		if (!any) {
			lb = lo, ub = hi, tlb = tlo, tub = thi;
			d->prim = c->prim;
		} else {
			lb = lo < lb ? lo : lb;
			ub = hi > ub ? hi : ub;
			tlb = tlo < tlb ? tlo : tlb;
			tub = thi > tub ? thi : tub;
		}
		if (any && c->prim != d->prim)
			mixed = true;
		any = true;
		d->size += (size_t)bl[k] * c->size;
		d->nprim += (size_t)bl[k] * c->nprim;
	}
	if (mixed)
		d->prim = 0;
	d->lb = lb;
	d->extent = ub - lb;
	d->true_lb = tlb;
	d->true_ub = tub;
	d->refs = 1;
	*out_p = d;
	return MPI_SUCCESS;
}

/* Record the constructor's arguments, publish the type. */
static int dt_publish(dtype_t *d, int combiner, int ni, const int *ints, int na,
		      const MPI_Aint *aints, int nt, const MPI_Datatype *ts,
		      MPI_Datatype *newtype)
{
	d->combiner = combiner;
	d->ni = ni, d->na = na, d->nt = nt;
	d->ints = malloc((ni + 1) * sizeof(int));
	d->aints = malloc((na + 1) * sizeof(MPI_Aint));
	d->types = malloc((nt + 1) * sizeof(MPI_Datatype));
	int i = -1;
	if (d->ints && d->aints && d->types)
		i = pcori_mpi_tab_add(&types, d, 0);
	if (i < 0) {
		dt_destroy(d);
		return MPI_ERR_OTHER;
	}
	if (ni)
		memcpy(d->ints, ints, ni * sizeof(int));
	if (na)
		memcpy(d->aints, aints, na * sizeof(MPI_Aint));
	if (nt)
		memcpy(d->types, ts, nt * sizeof(MPI_Datatype));
	*newtype = (MPI_Datatype)(DTYPE_KIND | (unsigned)i);
	return MPI_SUCCESS;
}

/*
 * The common path of the constructors over one old type: n pieces of
 * bl[k] elements at disp[k] (in units of unit bytes).
 */
static int dt_simple(const char *fn, int n, const int *bl, const MPI_Aint *disp,
		     MPI_Aint unit_elems, MPI_Datatype old,
		     MPI_Datatype *newtype, int combiner, int ni,
		     const int *ints, int na, const MPI_Aint *aints)
{
	CHECK_INIT(fn);
	dtype_t *c = pcori_mpi_type(old);
	if (!c)
		return FAIL(MPI_COMM_WORLD, fn, MPI_ERR_TYPE);
	if (n < 0)
		return FAIL(MPI_COMM_WORLD, fn, MPI_ERR_COUNT);
	if (!newtype || (n && (!bl || !disp)))
		return FAIL(MPI_COMM_WORLD, fn, MPI_ERR_ARG);
	for (int k = 0; k < n; k++)
		if (bl[k] < 0)
			return FAIL(MPI_COMM_WORLD, fn, MPI_ERR_COUNT);
	dtype_t **kids = malloc((n + 1) * sizeof(*kids));
	MPI_Aint *bytes = malloc((n + 1) * sizeof(*bytes));
	int err = kids && bytes ? MPI_SUCCESS : MPI_ERR_OTHER;
	for (int k = 0; k < n && !err; k++) {
		kids[k] = c;
		bytes[k] = disp[k] * (unit_elems ? c->extent : 1);
	}
	dtype_t *d = NULL;
	if (!err)
		err = dt_build(n, kids, bytes, bl, &d);
	free(kids);
	free(bytes);
	if (!err)
		err = dt_publish(d, combiner, ni, ints, na, aints, 1, &old,
				 newtype);
	RETURN(MPI_COMM_WORLD, fn, err);
}

int MPI_Type_contiguous(int count, MPI_Datatype oldtype, MPI_Datatype *newtype)
{
	MPI_Aint zero = 0;
	if (count < 0)
		return FAIL(MPI_COMM_WORLD, "MPI_Type_contiguous",
			    MPI_ERR_COUNT);
	return dt_simple("MPI_Type_contiguous", 1, &count, &zero, 1, oldtype,
			 newtype, MPI_COMBINER_CONTIGUOUS, 1, &count, 0, NULL);
}

/* vector / hvector: count blocks, stride in elements or bytes. */
static int dt_vector(const char *fn, int count, int blocklength,
		     MPI_Aint stride, bool bytes, MPI_Datatype old,
		     MPI_Datatype *newtype)
{
	if (count < 0 || blocklength < 0)
		return FAIL(MPI_COMM_WORLD, fn, MPI_ERR_COUNT);
	int *bl = malloc((count + 1) * sizeof(int));
	MPI_Aint *disp = malloc((count + 1) * sizeof(MPI_Aint));
	if (!bl || !disp) {
		free(bl);
		free(disp);
		return FAIL(MPI_COMM_WORLD, fn, MPI_ERR_OTHER);
	}
	for (int k = 0; k < count; k++) {
		bl[k] = blocklength;
		disp[k] = (MPI_Aint)k * stride;
	}
	int ints[3] = {count, blocklength, (int)stride};
	int rc = dt_simple(fn, count, bl, disp, !bytes, old, newtype,
			   bytes ? MPI_COMBINER_HVECTOR : MPI_COMBINER_VECTOR,
			   bytes ? 2 : 3, ints, bytes ? 1 : 0, &stride);
	free(bl);
	free(disp);
	return rc;
}

int MPI_Type_vector(int count, int blocklength, int stride,
		    MPI_Datatype oldtype, MPI_Datatype *newtype)
{
	return dt_vector("MPI_Type_vector", count, blocklength, stride, false,
			 oldtype, newtype);
}

int MPI_Type_create_hvector(int count, int blocklength, MPI_Aint stride,
			    MPI_Datatype oldtype, MPI_Datatype *newtype)
{
	return dt_vector("MPI_Type_create_hvector", count, blocklength, stride,
			 true, oldtype, newtype);
}

/* indexed / indexed_block: displacements in elements of the old type. */
static int dt_indexed(const char *fn, int count, const int *bls, int bl1,
		      const int *displs, MPI_Datatype old,
		      MPI_Datatype *newtype)
{
	if (count < 0)
		return FAIL(MPI_COMM_WORLD, fn, MPI_ERR_COUNT);
	if (count && (!displs || (!bls && bl1 < 0)))
		return FAIL(MPI_COMM_WORLD, fn, MPI_ERR_ARG);
	int *bl = malloc((count + 1) * sizeof(int));
	MPI_Aint *disp = malloc((count + 1) * sizeof(MPI_Aint));
	int *ints = malloc((2 * count + 2) * sizeof(int));
	int rc = MPI_ERR_OTHER, ni = 0;
	if (bl && disp && ints) {
		ints[ni++] = count;
		if (!bls)
			ints[ni++] = bl1;
		for (int k = 0; k < count; k++) {
			bl[k] = bls ? bls[k] : bl1;
			disp[k] = displs[k];
			if (bls)
				ints[ni++] = bls[k];
		}
		for (int k = 0; k < count; k++)
			ints[ni++] = displs[k];
		rc = dt_simple(fn, count, bl, disp, 1, old, newtype,
			       bls ? MPI_COMBINER_INDEXED
				   : MPI_COMBINER_INDEXED_BLOCK,
			       ni, ints, 0, NULL);
	} else {
		rc = FAIL(MPI_COMM_WORLD, fn, rc);
	}
	free(bl);
	free(disp);
	free(ints);
	return rc;
}

int MPI_Type_indexed(int count, const int array_of_blocklengths[],
		     const int array_of_displacements[], MPI_Datatype oldtype,
		     MPI_Datatype *newtype)
{
	if (count > 0 && !array_of_blocklengths)
		return FAIL(MPI_COMM_WORLD, "MPI_Type_indexed", MPI_ERR_ARG);
	return dt_indexed("MPI_Type_indexed", count, array_of_blocklengths, 0,
			  array_of_displacements, oldtype, newtype);
}

int MPI_Type_create_indexed_block(int count, int blocklength,
				  const int array_of_displacements[],
				  MPI_Datatype oldtype, MPI_Datatype *newtype)
{
	if (blocklength < 0)
		return FAIL(MPI_COMM_WORLD, "MPI_Type_create_indexed_block",
			    MPI_ERR_COUNT);
	return dt_indexed("MPI_Type_create_indexed_block", count, NULL,
			  blocklength, array_of_displacements, oldtype,
			  newtype);
}

int MPI_Type_create_struct(int count, const int array_of_blocklengths[],
			   const MPI_Aint array_of_displacements[],
			   const MPI_Datatype array_of_types[],
			   MPI_Datatype *newtype)
{
	const char *fn = "MPI_Type_create_struct";
	CHECK_INIT(fn);
	if (count < 0)
		return FAIL(MPI_COMM_WORLD, fn, MPI_ERR_COUNT);
	if (!newtype || (count && (!array_of_blocklengths ||
				   !array_of_displacements || !array_of_types)))
		return FAIL(MPI_COMM_WORLD, fn, MPI_ERR_ARG);
	dtype_t **kids = malloc((count + 1) * sizeof(*kids));
	int *ints = malloc((count + 1) * sizeof(int));
	if (!kids || !ints) {
		free(kids);
		free(ints);
		return FAIL(MPI_COMM_WORLD, fn, MPI_ERR_OTHER);
	}
	int err = MPI_SUCCESS;
	ints[0] = count;
	for (int k = 0; k < count && !err; k++) {
		kids[k] = pcori_mpi_type(array_of_types[k]);
		if (!kids[k])
			err = MPI_ERR_TYPE;
		else if (array_of_blocklengths[k] < 0)
			err = MPI_ERR_COUNT;
		ints[k + 1] = array_of_blocklengths[k];
	}
	dtype_t *d = NULL;
	if (!err)
		err = dt_build(count, kids, array_of_displacements,
			       array_of_blocklengths, &d);
	if (!err)
		err = dt_publish(d, MPI_COMBINER_STRUCT, count + 1, ints, count,
				 array_of_displacements, count, array_of_types,
				 newtype);
	free(kids);
	free(ints);
	RETURN(MPI_COMM_WORLD, fn, err);
}

int MPI_Type_create_resized(MPI_Datatype oldtype, MPI_Aint lb, MPI_Aint extent,
			    MPI_Datatype *newtype)
{
	const char *fn = "MPI_Type_create_resized";
	CHECK_INIT(fn);
	dtype_t *c = pcori_mpi_type(oldtype);
	if (!c)
		return FAIL(MPI_COMM_WORLD, fn, MPI_ERR_TYPE);
	if (!newtype)
		return FAIL(MPI_COMM_WORLD, fn, MPI_ERR_ARG);
	int one = 1;
	MPI_Aint zero = 0;
	dtype_t *d = NULL;
	int err = dt_build(1, &c, &zero, &one, &d);
	if (!err) {
		d->lb = lb;
		d->extent = extent;
		MPI_Aint a[2] = {lb, extent};
		err = dt_publish(d, MPI_COMBINER_RESIZED, 0, NULL, 2, a, 1,
				 &oldtype, newtype);
	}
	RETURN(MPI_COMM_WORLD, fn, err);
}

int MPI_Type_commit(MPI_Datatype *datatype)
{
	CHECK_INIT("MPI_Type_commit");
	dtype_t *d = datatype ? pcori_mpi_type(*datatype) : NULL;
	if (!d)
		return FAIL(MPI_COMM_WORLD, "MPI_Type_commit", MPI_ERR_TYPE);
	d->committed = true;
	return MPI_SUCCESS;
}

int MPI_Type_free(MPI_Datatype *datatype)
{
	CHECK_INIT("MPI_Type_free");
	dtype_t *d = datatype ? pcori_mpi_type(*datatype) : NULL;
	if (!d || d->predef)
		return FAIL(MPI_COMM_WORLD, "MPI_Type_free", MPI_ERR_TYPE);
	pcori_mpi_tab_del(&types, HINDEX(*datatype));
	dt_destroy(d);
	*datatype = MPI_DATATYPE_NULL;
	return MPI_SUCCESS;
}

int MPI_Type_size(MPI_Datatype datatype, int *size)
{
	dtype_t *d = pcori_mpi_type(datatype);
	if (!d)
		return FAIL(MPI_COMM_WORLD, "MPI_Type_size", MPI_ERR_TYPE);
	if (!size)
		return FAIL(MPI_COMM_WORLD, "MPI_Type_size", MPI_ERR_ARG);
	*size = (int)d->size;
	return MPI_SUCCESS;
}

int MPI_Type_get_extent(MPI_Datatype datatype, MPI_Aint *lb, MPI_Aint *extent)
{
	dtype_t *d = pcori_mpi_type(datatype);
	if (!d)
		return FAIL(MPI_COMM_WORLD, "MPI_Type_get_extent",
			    MPI_ERR_TYPE);
	if (!lb || !extent)
		return FAIL(MPI_COMM_WORLD, "MPI_Type_get_extent", MPI_ERR_ARG);
	*lb = d->lb;
	*extent = d->extent;
	return MPI_SUCCESS;
}

int MPI_Type_get_true_extent(MPI_Datatype datatype, MPI_Aint *true_lb,
			     MPI_Aint *true_extent)
{
	dtype_t *d = pcori_mpi_type(datatype);
	if (!d)
		return FAIL(MPI_COMM_WORLD, "MPI_Type_get_true_extent",
			    MPI_ERR_TYPE);
	if (!true_lb || !true_extent)
		return FAIL(MPI_COMM_WORLD, "MPI_Type_get_true_extent",
			    MPI_ERR_ARG);
	*true_lb = d->true_lb;
	*true_extent = d->true_ub - d->true_lb;
	return MPI_SUCCESS;
}

int MPI_Get_address(const void *location, MPI_Aint *address)
{
	if (!address)
		return FAIL(MPI_COMM_WORLD, "MPI_Get_address", MPI_ERR_ARG);
	*address = (MPI_Aint)(uintptr_t)location;
	return MPI_SUCCESS;
}

int MPI_Get_count(const MPI_Status *status, MPI_Datatype datatype, int *count)
{
	dtype_t *d = pcori_mpi_type(datatype);
	if (!d)
		return FAIL(MPI_COMM_WORLD, "MPI_Get_count", MPI_ERR_TYPE);
	if (!status || !count)
		return FAIL(MPI_COMM_WORLD, "MPI_Get_count", MPI_ERR_ARG);
	size_t b = status->pcor_bytes_;
	if (!d->size)
		*count = b ? MPI_UNDEFINED : 0;
	else
		*count = b % d->size ? MPI_UNDEFINED : (int)(b / d->size);
	return MPI_SUCCESS;
}

int MPI_Get_elements(const MPI_Status *status, MPI_Datatype datatype,
		     int *count)
{
	dtype_t *d = pcori_mpi_type(datatype);
	if (!d)
		return FAIL(MPI_COMM_WORLD, "MPI_Get_elements", MPI_ERR_TYPE);
	if (!status || !count)
		return FAIL(MPI_COMM_WORLD, "MPI_Get_elements", MPI_ERR_ARG);
	size_t b = status->pcor_bytes_;
	if (!d->size) {
		*count = 0;
		return MPI_SUCCESS;
	}
	size_t whole = b / d->size, rest = b % d->size;
	size_t psz = d->prim ? predef_size(d->prim) : 0;
	/* A partial element is counted when its primitives are alike. */
	if (rest && (!psz || rest % psz))
		*count = MPI_UNDEFINED;
	else
		*count = (int)(whole * d->nprim + (psz ? rest / psz : 0));
	return MPI_SUCCESS;
}

int MPI_Type_get_envelope(MPI_Datatype datatype, int *num_integers,
			  int *num_addresses, int *num_datatypes, int *combiner)
{
	dtype_t *d = pcori_mpi_type(datatype);
	if (!d)
		return FAIL(MPI_COMM_WORLD, "MPI_Type_get_envelope",
			    MPI_ERR_TYPE);
	if (!num_integers || !num_addresses || !num_datatypes || !combiner)
		return FAIL(MPI_COMM_WORLD, "MPI_Type_get_envelope",
			    MPI_ERR_ARG);
	*num_integers = d->ni;
	*num_addresses = d->na;
	*num_datatypes = d->nt;
	*combiner = d->combiner;
	return MPI_SUCCESS;
}

int MPI_Type_get_contents(MPI_Datatype datatype, int max_integers,
			  int max_addresses, int max_datatypes,
			  int array_of_integers[],
			  MPI_Aint array_of_addresses[],
			  MPI_Datatype array_of_datatypes[])
{
	dtype_t *d = pcori_mpi_type(datatype);
	if (!d || d->predef)
		return FAIL(MPI_COMM_WORLD, "MPI_Type_get_contents",
			    MPI_ERR_TYPE);
	if (max_integers < d->ni || max_addresses < d->na ||
	    max_datatypes < d->nt || (d->ni && !array_of_integers) ||
	    (d->na && !array_of_addresses) || (d->nt && !array_of_datatypes))
		return FAIL(MPI_COMM_WORLD, "MPI_Type_get_contents",
			    MPI_ERR_ARG);
	if (d->ni)
		memcpy(array_of_integers, d->ints, d->ni * sizeof(int));
	if (d->na)
		memcpy(array_of_addresses, d->aints, d->na * sizeof(MPI_Aint));
	if (d->nt)
		memcpy(array_of_datatypes, d->types,
		       d->nt * sizeof(MPI_Datatype));
	return MPI_SUCCESS;
}

int MPI_Type_set_name(MPI_Datatype datatype, const char *type_name)
{
	dtype_t *d = pcori_mpi_type(datatype);
	if (!d || d->predef)
		return FAIL(MPI_COMM_WORLD, "MPI_Type_set_name", MPI_ERR_TYPE);
	if (!type_name)
		return FAIL(MPI_COMM_WORLD, "MPI_Type_set_name", MPI_ERR_ARG);
	snprintf(d->name, sizeof(d->name), "%s", type_name);
	return MPI_SUCCESS;
}

int MPI_Type_get_name(MPI_Datatype datatype, char *type_name, int *resultlen)
{
	dtype_t *d = pcori_mpi_type(datatype);
	if (!d)
		return FAIL(MPI_COMM_WORLD, "MPI_Type_get_name", MPI_ERR_TYPE);
	if (!type_name || !resultlen)
		return FAIL(MPI_COMM_WORLD, "MPI_Type_get_name", MPI_ERR_ARG);
	strcpy(type_name, d->name);
	*resultlen = (int)strlen(d->name);
	return MPI_SUCCESS;
}
