/*
 * op.c -- reduction operations: the predefined ones on every C type
 * they are defined for, and user functions (MPI_Op_create).
 */
#include <stdlib.h>

#include "mpii.h"
#define FOR_INT(X)                                                        \
	X(MPI_CHAR, char) X(MPI_SIGNED_CHAR, signed char)                 \
	X(MPI_UNSIGNED_CHAR, unsigned char) X(MPI_SHORT, short)           \
	X(MPI_UNSIGNED_SHORT, unsigned short) X(MPI_INT, int)             \
	X(MPI_UNSIGNED, unsigned) X(MPI_LONG, long)                       \
	X(MPI_UNSIGNED_LONG, unsigned long) X(MPI_LONG_LONG, long long)   \
	X(MPI_UNSIGNED_LONG_LONG, unsigned long long)                     \
	X(MPI_INT8_T, int8_t) X(MPI_UINT8_T, uint8_t)                     \
	X(MPI_INT16_T, int16_t) X(MPI_UINT16_T, uint16_t)                 \
	X(MPI_INT32_T, int32_t) X(MPI_UINT32_T, uint32_t)                 \
	X(MPI_INT64_T, int64_t) X(MPI_UINT64_T, uint64_t)                 \
	X(MPI_AINT, MPI_Aint)
#define FOR_FLOAT(X) X(MPI_FLOAT, float) X(MPI_DOUBLE, double)

typedef struct { int v, i; } pair_ii;
typedef struct { float v; int i; } pair_fi;
typedef struct { double v; int i; } pair_di;
typedef struct { long v; int i; } pair_li;

#define LOOP(T, EXPR)                                                     \
	do {                                                              \
		const T *a = in;                                          \
		T *b = inout;                                             \
		for (size_t k = 0; k < n; k++)                            \
			b[k] = (EXPR);                                    \
	} while (0)

#define LOC(T, CMP)                                                       \
	do {                                                              \
		const T *a = in;                                          \
		T *b = inout;                                             \
		for (size_t k = 0; k < n; k++)                            \
			if (a[k].v CMP b[k].v ||                          \
			    (a[k].v == b[k].v && a[k].i < b[k].i))        \
				b[k] = a[k];                              \
	} while (0)

/* User operations: 0x58000100 + index. */
#define USER_OP0 0x58000100
#define MAX_USER_OPS 64
static _Atomic(MPI_User_function *) user_ops[MAX_USER_OPS];

int pcori_mpi_op_apply(MPI_Op op, MPI_Datatype t, const void *in,
		       void *inout, size_t n)
{
	if (op >= USER_OP0 && op < USER_OP0 + MAX_USER_OPS) {
		int len = (int)n;
		MPI_User_function *fn = atomic_load(&user_ops[op - USER_OP0]);
		fn((void *)in, inout, &len, &t);
		return MPI_SUCCESS;
	}
	if (op == MPI_MAXLOC || op == MPI_MINLOC) {
		bool mx = op == MPI_MAXLOC;
		switch (t) {
		case MPI_2INT:
			if (mx) LOC(pair_ii, >); else LOC(pair_ii, <);
			return MPI_SUCCESS;
		case MPI_FLOAT_INT:
			if (mx) LOC(pair_fi, >); else LOC(pair_fi, <);
			return MPI_SUCCESS;
		case MPI_DOUBLE_INT:
			if (mx) LOC(pair_di, >); else LOC(pair_di, <);
			return MPI_SUCCESS;
		case MPI_LONG_INT:
			if (mx) LOC(pair_li, >); else LOC(pair_li, <);
			return MPI_SUCCESS;
		default:
			return MPI_ERR_OP;
		}
	}
	switch (t) {
/* The ops every arithmetic type has; integers add the bitwise ones. */
#define ARITH_OPS(T)                                                      \
	case MPI_SUM: LOOP(T, a[k] + b[k]); break;                        \
	case MPI_PROD: LOOP(T, a[k] * b[k]); break;                       \
	case MPI_MAX: LOOP(T, a[k] > b[k] ? a[k] : b[k]); break;          \
	case MPI_MIN: LOOP(T, a[k] < b[k] ? a[k] : b[k]); break;          \
	case MPI_LAND: LOOP(T, a[k] && b[k]); break;                      \
	case MPI_LOR: LOOP(T, a[k] || b[k]); break;                       \
	case MPI_LXOR: LOOP(T, !a[k] != !b[k]); break;
#define INT_CASE(H, T)                                                    \
	case H:                                                           \
		switch (op) {                                             \
		ARITH_OPS(T)                                              \
		case MPI_BAND: LOOP(T, a[k] & b[k]); break;               \
		case MPI_BOR: LOOP(T, a[k] | b[k]); break;                \
		case MPI_BXOR: LOOP(T, a[k] ^ b[k]); break;               \
		default: return MPI_ERR_OP;                               \
		}                                                         \
		return MPI_SUCCESS;
	FOR_INT(INT_CASE)
#define FLT_CASE(H, T)                                                    \
	case H:                                                           \
		switch (op) {                                             \
		ARITH_OPS(T)                                              \
		default: return MPI_ERR_OP;                               \
		}                                                         \
		return MPI_SUCCESS;
	FOR_FLOAT(FLT_CASE)
	case MPI_C_BOOL:
		switch (op) {
		case MPI_LAND: LOOP(_Bool, a[k] && b[k]); break;
		case MPI_LOR: LOOP(_Bool, a[k] || b[k]); break;
		case MPI_LXOR: LOOP(_Bool, a[k] != b[k]); break;
		default: return MPI_ERR_OP;
		}
		return MPI_SUCCESS;
	case MPI_BYTE:
		switch (op) {
		case MPI_BAND: LOOP(unsigned char, a[k] & b[k]); break;
		case MPI_BOR: LOOP(unsigned char, a[k] | b[k]); break;
		case MPI_BXOR: LOOP(unsigned char, a[k] ^ b[k]); break;
		default: return MPI_ERR_OP;
		}
		return MPI_SUCCESS;
	default:
		return MPI_ERR_OP;
	}
}

bool pcori_mpi_op_ok(MPI_Op op)
{
	if (op >= MPI_MAX && op <= MPI_MAXLOC)
		return true;
	return op >= USER_OP0 && op < USER_OP0 + MAX_USER_OPS &&
	       atomic_load(&user_ops[op - USER_OP0]);
}

int MPI_Op_create(MPI_User_function *user_fn, int commute, MPI_Op *op)
{
	(void)commute; /* every reduction here folds in rank order */
	if (!user_fn || !op)
		return FAIL(MPI_COMM_WORLD, "MPI_Op_create", MPI_ERR_ARG);
	pthread_mutex_lock(&pcori_mpi.lock);
	for (int i = 0; i < MAX_USER_OPS; i++)
		if (!atomic_load(&user_ops[i])) {
			atomic_store(&user_ops[i], user_fn);
			pthread_mutex_unlock(&pcori_mpi.lock);
			*op = USER_OP0 + i;
			return MPI_SUCCESS;
		}
	pthread_mutex_unlock(&pcori_mpi.lock);
	return FAIL(MPI_COMM_WORLD, "MPI_Op_create", MPI_ERR_OTHER);
}

int MPI_Op_free(MPI_Op *op)
{
	if (!op || *op < USER_OP0 || *op >= USER_OP0 + MAX_USER_OPS ||
	    !atomic_load(&user_ops[*op - USER_OP0]))
		return FAIL(MPI_COMM_WORLD, "MPI_Op_free", MPI_ERR_OP);
	atomic_store(&user_ops[*op - USER_OP0], NULL);
	*op = MPI_OP_NULL;
	return MPI_SUCCESS;
}
