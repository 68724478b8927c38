/*
 * mpi_check.h -- the checks of the MPI test programs.  A failed check
 * prints the rank (the including file's `rank`) and line, then exits 1.
 */
#ifndef PCOR_TESTS_MPI_CHECK_H
#define PCOR_TESTS_MPI_CHECK_H

#include <stdio.h>
#include <stdlib.h>

#define CHECK(c)                                                              \
	do {                                                                  \
		if (!(c)) {                                                   \
			fprintf(stderr,                                       \
				"rank %d: check failed at %s:%d: %s\n", rank, \
				__FILE__, __LINE__, #c);                      \
			exit(1);                                              \
		}                                                             \
	} while (0)
#define OK(call) CHECK((call) == MPI_SUCCESS)

#endif /* PCOR_TESTS_MPI_CHECK_H */
