/*
 * mpi.h -- the MPI subset that pcor's shim (libpcor_mpi) implements.
 *
 * An MPI rank is one pcor process.  The shim provides up to
 * MPI_THREAD_MULTIPLE: any thread may call MPI at any time (a thread that
 * is not yet a pcor thread is attached on its first call and detached
 * when it ends); threads on different communicators match under
 * different locks.  Handles are integers in
 * MPICH's style.  Only what is implemented is declared here: a program
 * that compiles against this header links against libpcor_mpi.  Build
 * with tools/pcorcc and run with pcorrun -n N (or Open MPI's mpirun
 * through PMIx).  See docs/mpi.md for what each call does here.
 *
 * Every function returns MPI_SUCCESS or an error class; errors go
 * through the communicator's error handler first (MPI_ERRORS_ARE_FATAL
 * by default: a message naming the call and the rank, then the job
 * ends).  Objects (communicators, groups, datatypes, requests, info)
 * belong to the caller until freed; buffers passed to a nonblocking call
 * belong to the operation until its request completes.
 */
#ifndef PCOR_MPI_H
#define PCOR_MPI_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MPI_VERSION 3
#define MPI_SUBVERSION 1

typedef int MPI_Comm;
typedef int MPI_Datatype;
typedef int MPI_Op;
typedef int MPI_Request;
typedef int MPI_Errhandler;
typedef int MPI_Info;
typedef int MPI_Group;
typedef int MPI_Win;
typedef ptrdiff_t MPI_Aint;
typedef long long MPI_Count;

/* The first three fields are the standard's; the rest are private. */
typedef struct MPI_Status {
	int MPI_SOURCE;
	int MPI_TAG;
	int MPI_ERROR;
	int pcor_cancelled_;
	size_t pcor_bytes_;
} MPI_Status;

#define MPI_STATUS_IGNORE ((MPI_Status *)0)
#define MPI_STATUSES_IGNORE ((MPI_Status *)0)

/* Communicators. */
#define MPI_COMM_NULL ((MPI_Comm)0x04000000)
#define MPI_COMM_WORLD ((MPI_Comm)0x44000000)
#define MPI_COMM_SELF ((MPI_Comm)0x44000001)

#define MPI_WIN_NULL ((MPI_Win)0x20000000)

/* Topologies (MPI_Topo_test) and graph weights. */
#define MPI_GRAPH 1
#define MPI_CART 2
#define MPI_DIST_GRAPH 3
/* Addresses of the library's own (so compilers see real arrays). */
extern int pcor_mpi_unweighted_[1], pcor_mpi_weights_empty_[1];
#define MPI_UNWEIGHTED (pcor_mpi_unweighted_)
#define MPI_WEIGHTS_EMPTY (pcor_mpi_weights_empty_)

/* Groups. */
#define MPI_GROUP_NULL ((MPI_Group)0x08000000)
#define MPI_GROUP_EMPTY ((MPI_Group)0x48000000)

/* Results of MPI_Comm_compare and MPI_Group_compare. */
#define MPI_IDENT 0
#define MPI_CONGRUENT 1
#define MPI_SIMILAR 2
#define MPI_UNEQUAL 3

/* Predefined datatypes: 0x4c000000 | size << 8 | index. */
#define MPI_DATATYPE_NULL ((MPI_Datatype)0x0c000000)
#define MPI_CHAR ((MPI_Datatype)0x4c000101)
#define MPI_SIGNED_CHAR ((MPI_Datatype)0x4c000102)
#define MPI_UNSIGNED_CHAR ((MPI_Datatype)0x4c000103)
#define MPI_BYTE ((MPI_Datatype)0x4c000104)
#define MPI_SHORT ((MPI_Datatype)0x4c000205)
#define MPI_UNSIGNED_SHORT ((MPI_Datatype)0x4c000206)
#define MPI_INT ((MPI_Datatype)0x4c000407)
#define MPI_UNSIGNED ((MPI_Datatype)0x4c000408)
#define MPI_LONG ((MPI_Datatype)0x4c000809)
#define MPI_UNSIGNED_LONG ((MPI_Datatype)0x4c00080a)
#define MPI_LONG_LONG ((MPI_Datatype)0x4c00080b)
#define MPI_LONG_LONG_INT MPI_LONG_LONG
#define MPI_UNSIGNED_LONG_LONG ((MPI_Datatype)0x4c00080c)
#define MPI_FLOAT ((MPI_Datatype)0x4c00040d)
#define MPI_DOUBLE ((MPI_Datatype)0x4c00080e)
#define MPI_INT8_T ((MPI_Datatype)0x4c00010f)
#define MPI_UINT8_T ((MPI_Datatype)0x4c000110)
#define MPI_INT16_T ((MPI_Datatype)0x4c000211)
#define MPI_UINT16_T ((MPI_Datatype)0x4c000212)
#define MPI_INT32_T ((MPI_Datatype)0x4c000413)
#define MPI_UINT32_T ((MPI_Datatype)0x4c000414)
#define MPI_INT64_T ((MPI_Datatype)0x4c000815)
#define MPI_UINT64_T ((MPI_Datatype)0x4c000816)
#define MPI_C_BOOL ((MPI_Datatype)0x4c000117)
#define MPI_AINT ((MPI_Datatype)0x4c000818)
#define MPI_2INT ((MPI_Datatype)0x4c000819)
#define MPI_FLOAT_INT ((MPI_Datatype)0x4c00081a)
#define MPI_DOUBLE_INT ((MPI_Datatype)0x4c00101b)
#define MPI_LONG_INT ((MPI_Datatype)0x4c00101c)

/* Reduction operations. */
#define MPI_OP_NULL ((MPI_Op)0x18000000)
#define MPI_MAX ((MPI_Op)0x58000001)
#define MPI_MIN ((MPI_Op)0x58000002)
#define MPI_SUM ((MPI_Op)0x58000003)
#define MPI_PROD ((MPI_Op)0x58000004)
#define MPI_LAND ((MPI_Op)0x58000005)
#define MPI_BAND ((MPI_Op)0x58000006)
#define MPI_LOR ((MPI_Op)0x58000007)
#define MPI_BOR ((MPI_Op)0x58000008)
#define MPI_LXOR ((MPI_Op)0x58000009)
#define MPI_BXOR ((MPI_Op)0x5800000a)
#define MPI_MINLOC ((MPI_Op)0x5800000b)
#define MPI_MAXLOC ((MPI_Op)0x5800000c)

#define MPI_REQUEST_NULL ((MPI_Request)0x2c000000)

#define MPI_ERRHANDLER_NULL ((MPI_Errhandler)0x14000000)
#define MPI_ERRORS_ARE_FATAL ((MPI_Errhandler)0x54000000)
#define MPI_ERRORS_RETURN ((MPI_Errhandler)0x54000001)

/* Special ranks, tags, counts and buffers. */
#define MPI_ANY_SOURCE (-2)
#define MPI_PROC_NULL (-1)
#define MPI_ROOT (-3)
#define MPI_ANY_TAG (-1)
#define MPI_UNDEFINED (-32766)
#define MPI_IN_PLACE ((void *)-1)
#define MPI_BOTTOM ((void *)0)
#define MPI_INFO_NULL ((MPI_Info)0x1c000000)

/* Thread levels. */
#define MPI_THREAD_SINGLE 0
#define MPI_THREAD_FUNNELED 1
#define MPI_THREAD_SERIALIZED 2
#define MPI_THREAD_MULTIPLE 3

#define MPI_MAX_ERROR_STRING 512
#define MPI_MAX_PROCESSOR_NAME 128
#define MPI_MAX_LIBRARY_VERSION_STRING 256
#define MPI_MAX_OBJECT_NAME 128
#define MPI_MAX_INFO_KEY 255
#define MPI_MAX_INFO_VAL 1024

/* Error classes (MPICH's numbering). */
#define MPI_SUCCESS 0
#define MPI_ERR_BUFFER 1
#define MPI_ERR_COUNT 2
#define MPI_ERR_TYPE 3
#define MPI_ERR_TAG 4
#define MPI_ERR_COMM 5
#define MPI_ERR_RANK 6
#define MPI_ERR_ROOT 7
#define MPI_ERR_TRUNCATE 14
#define MPI_ERR_GROUP 8
#define MPI_ERR_OP 9
#define MPI_ERR_REQUEST 19
#define MPI_ERR_ARG 12
#define MPI_ERR_UNKNOWN 13
#define MPI_ERR_OTHER 15
#define MPI_ERR_INTERN 16
#define MPI_ERR_IN_STATUS 17
#define MPI_ERR_PENDING 18
#define MPI_ERR_INFO_KEY 31
#define MPI_ERR_INFO_NOKEY 32
#define MPI_ERR_INFO_VALUE 33
#define MPI_ERR_INFO 34
#define MPI_ERR_TOPOLOGY 10
#define MPI_ERR_DIMS 11
#define MPI_ERR_WIN 45
#define MPI_ERR_KEYVAL 48
#define MPI_ERR_LASTCODE 0x3fffffff

/* Keys of MPI_Comm_get_attr: the predefined attributes (read only). */
#define MPI_TAG_UB 0x64400001
#define MPI_WTIME_IS_GLOBAL 0x64400003
#define MPI_HOST 0x64400005
#define MPI_IO 0x64400007
#define MPI_UNIVERSE_SIZE 0x64400009
#define MPI_APPNUM 0x6440000d

/*
 * User attribute keys (MPI_Comm_create_keyval).  The callbacks run in
 * the thread that calls MPI_Comm_dup (copy), MPI_Comm_set_attr,
 * MPI_Comm_delete_attr or MPI_Comm_free (delete), with no lock of the
 * shim held: they may call MPI.  A callback's error class fails the call
 * that ran it.
 */
#define MPI_KEYVAL_INVALID ((int)0x24000000)
typedef int MPI_Comm_copy_attr_function(MPI_Comm oldcomm, int comm_keyval,
					void *extra_state,
					void *attribute_val_in,
					void *attribute_val_out, int *flag);
typedef int MPI_Comm_delete_attr_function(MPI_Comm comm, int comm_keyval,
					  void *attribute_val,
					  void *extra_state);
/* The standard's callbacks: no copy, copy the value, nothing to delete. */
int pcor_mpi_comm_null_copy_fn_(MPI_Comm oldcomm, int comm_keyval,
				void *extra_state, void *attribute_val_in,
				void *attribute_val_out, int *flag);
int pcor_mpi_comm_dup_fn_(MPI_Comm oldcomm, int comm_keyval, void *extra_state,
			  void *attribute_val_in, void *attribute_val_out,
			  int *flag);
int pcor_mpi_comm_null_delete_fn_(MPI_Comm comm, int comm_keyval,
				  void *attribute_val, void *extra_state);
#define MPI_COMM_NULL_COPY_FN pcor_mpi_comm_null_copy_fn_
#define MPI_COMM_DUP_FN pcor_mpi_comm_dup_fn_
#define MPI_COMM_NULL_DELETE_FN pcor_mpi_comm_null_delete_fn_

/* MPI_Comm_split_type: the processes that share a host. */
#define MPI_COMM_TYPE_SHARED 1

#define MPI_BSEND_OVERHEAD 0

/* Type constructors, as MPI_Type_get_envelope reports them. */
#define MPI_COMBINER_NAMED 1
#define MPI_COMBINER_CONTIGUOUS 3
#define MPI_COMBINER_VECTOR 4
#define MPI_COMBINER_HVECTOR 5
#define MPI_COMBINER_INDEXED 6
#define MPI_COMBINER_INDEXED_BLOCK 8
#define MPI_COMBINER_STRUCT 9
#define MPI_COMBINER_RESIZED 10

/* Environment. */
int MPI_Init(int *argc, char ***argv);
int MPI_Init_thread(int *argc, char ***argv, int required, int *provided);
int MPI_Finalize(void);
int MPI_Initialized(int *flag);
int MPI_Finalized(int *flag);
int MPI_Query_thread(int *provided);
int MPI_Is_thread_main(int *flag);
int MPI_Abort(MPI_Comm comm, int errorcode);
int MPI_Get_version(int *version, int *subversion);
int MPI_Get_library_version(char *version, int *resultlen);
int MPI_Get_processor_name(char *name, int *resultlen);
int MPI_Pcontrol(const int level, ...);
double MPI_Wtime(void);
double MPI_Wtick(void);

/* Errors. */
int MPI_Comm_set_errhandler(MPI_Comm comm, MPI_Errhandler errhandler);
int MPI_Comm_get_errhandler(MPI_Comm comm, MPI_Errhandler *errhandler);
int MPI_Error_string(int errorcode, char *string, int *resultlen);
int MPI_Error_class(int errorcode, int *errorclass);

/* Communicators. */
int MPI_Comm_rank(MPI_Comm comm, int *rank);
int MPI_Comm_size(MPI_Comm comm, int *size);
int MPI_Comm_dup(MPI_Comm comm, MPI_Comm *newcomm);
int MPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm *newcomm);
int MPI_Comm_compare(MPI_Comm comm1, MPI_Comm comm2, int *result);
int MPI_Comm_split_type(MPI_Comm comm, int split_type, int key,
			MPI_Info info, MPI_Comm *newcomm);
int MPI_Comm_create(MPI_Comm comm, MPI_Group group, MPI_Comm *newcomm);
int MPI_Comm_group(MPI_Comm comm, MPI_Group *group);
int MPI_Comm_set_name(MPI_Comm comm, const char *comm_name);
int MPI_Comm_get_name(MPI_Comm comm, char *comm_name, int *resultlen);
int MPI_Comm_free(MPI_Comm *comm);
int MPI_Comm_get_attr(MPI_Comm comm, int comm_keyval, void *attribute_val,
		      int *flag);
int MPI_Comm_create_keyval(MPI_Comm_copy_attr_function *comm_copy_attr_fn,
			   MPI_Comm_delete_attr_function *comm_delete_attr_fn,
			   int *comm_keyval, void *extra_state);
int MPI_Comm_free_keyval(int *comm_keyval);
int MPI_Comm_set_attr(MPI_Comm comm, int comm_keyval, void *attribute_val);
int MPI_Comm_delete_attr(MPI_Comm comm, int comm_keyval);

/* Groups (ordered sets of processes; collective calls need none). */
int MPI_Group_size(MPI_Group group, int *size);
int MPI_Group_rank(MPI_Group group, int *rank);
int MPI_Group_incl(MPI_Group group, int n, const int ranks[],
		   MPI_Group *newgroup);
int MPI_Group_excl(MPI_Group group, int n, const int ranks[],
		   MPI_Group *newgroup);
int MPI_Group_range_incl(MPI_Group group, int n, int ranges[][3],
			 MPI_Group *newgroup);
int MPI_Group_translate_ranks(MPI_Group group1, int n, const int ranks1[],
			      MPI_Group group2, int ranks2[]);
int MPI_Group_compare(MPI_Group group1, MPI_Group group2, int *result);
int MPI_Group_free(MPI_Group *group);

/* Info objects (kept, never interpreted). */
int MPI_Info_create(MPI_Info *info);
int MPI_Info_set(MPI_Info info, const char *key, const char *value);
int MPI_Info_get(MPI_Info info, const char *key, int valuelen, char *value,
		 int *flag);
int MPI_Info_get_nkeys(MPI_Info info, int *nkeys);
int MPI_Info_get_nthkey(MPI_Info info, int n, char *key);
int MPI_Info_delete(MPI_Info info, const char *key);
int MPI_Info_dup(MPI_Info info, MPI_Info *newinfo);
int MPI_Info_free(MPI_Info *info);

/* Memory (plain malloc: any memory can be sent). */
int MPI_Alloc_mem(MPI_Aint size, MPI_Info info, void *baseptr);
int MPI_Free_mem(void *base);

/*
 * Datatypes.  Derived types must be committed before use in
 * communication; freeing one does not affect types built from it.
 * Reductions take predefined types (or contiguous types of one), or any
 * contiguous type with a user operation.
 */
int MPI_Type_size(MPI_Datatype datatype, int *size);
int MPI_Get_count(const MPI_Status *status, MPI_Datatype datatype,
		  int *count);
int MPI_Get_elements(const MPI_Status *status, MPI_Datatype datatype,
		     int *count);
int MPI_Type_contiguous(int count, MPI_Datatype oldtype,
			MPI_Datatype *newtype);
int MPI_Type_vector(int count, int blocklength, int stride,
		    MPI_Datatype oldtype, MPI_Datatype *newtype);
int MPI_Type_create_hvector(int count, int blocklength, MPI_Aint stride,
			    MPI_Datatype oldtype, MPI_Datatype *newtype);
int MPI_Type_indexed(int count, const int array_of_blocklengths[],
		     const int array_of_displacements[],
		     MPI_Datatype oldtype, MPI_Datatype *newtype);
int MPI_Type_create_indexed_block(int count, int blocklength,
				  const int array_of_displacements[],
				  MPI_Datatype oldtype,
				  MPI_Datatype *newtype);
int MPI_Type_create_struct(int count, const int array_of_blocklengths[],
			   const MPI_Aint array_of_displacements[],
			   const MPI_Datatype array_of_types[],
			   MPI_Datatype *newtype);
int MPI_Type_create_resized(MPI_Datatype oldtype, MPI_Aint lb,
			    MPI_Aint extent, MPI_Datatype *newtype);
int MPI_Type_commit(MPI_Datatype *datatype);
int MPI_Type_set_name(MPI_Datatype datatype, const char *type_name);
int MPI_Type_get_name(MPI_Datatype datatype, char *type_name,
		      int *resultlen);
int MPI_Type_free(MPI_Datatype *datatype);
int MPI_Type_get_extent(MPI_Datatype datatype, MPI_Aint *lb,
			MPI_Aint *extent);
int MPI_Type_get_true_extent(MPI_Datatype datatype, MPI_Aint *true_lb,
			     MPI_Aint *true_extent);
int MPI_Get_address(const void *location, MPI_Aint *address);
int MPI_Type_get_envelope(MPI_Datatype datatype, int *num_integers,
			  int *num_addresses, int *num_datatypes,
			  int *combiner);
int MPI_Type_get_contents(MPI_Datatype datatype, int max_integers,
			  int max_addresses, int max_datatypes,
			  int array_of_integers[],
			  MPI_Aint array_of_addresses[],
			  MPI_Datatype array_of_datatypes[]);

/*
 * Point to point.  Ssend/Issend complete once the receiver has matched a
 * message of this sender and tag (docs/mpi.md); Rsend is a standard
 * send; Ibsend copies at once and its request is complete.
 */
int MPI_Ssend(const void *buf, int count, MPI_Datatype datatype, int dest,
	      int tag, MPI_Comm comm);
int MPI_Rsend(const void *buf, int count, MPI_Datatype datatype, int dest,
	      int tag, MPI_Comm comm);
int MPI_Issend(const void *buf, int count, MPI_Datatype datatype, int dest,
	       int tag, MPI_Comm comm, MPI_Request *request);
int MPI_Irsend(const void *buf, int count, MPI_Datatype datatype, int dest,
	       int tag, MPI_Comm comm, MPI_Request *request);
int MPI_Ibsend(const void *buf, int count, MPI_Datatype datatype, int dest,
	       int tag, MPI_Comm comm, MPI_Request *request);
int MPI_Sendrecv_replace(void *buf, int count, MPI_Datatype datatype,
			 int dest, int sendtag, int source, int recvtag,
			 MPI_Comm comm, MPI_Status *status);
int MPI_Testany(int count, MPI_Request requests[], int *index, int *flag,
		MPI_Status *status);
int MPI_Waitsome(int incount, MPI_Request requests[], int *outcount,
		 int indices[], MPI_Status statuses[]);
int MPI_Testsome(int incount, MPI_Request requests[], int *outcount,
		 int indices[], MPI_Status statuses[]);
/*
 * Persistent requests: made idle, started by MPI_Start(all), idle again
 * once Wait/Test has reported them; freed by MPI_Request_free.
 */
int MPI_Send_init(const void *buf, int count, MPI_Datatype datatype,
		  int dest, int tag, MPI_Comm comm, MPI_Request *request);
int MPI_Ssend_init(const void *buf, int count, MPI_Datatype datatype,
		   int dest, int tag, MPI_Comm comm, MPI_Request *request);
int MPI_Bsend_init(const void *buf, int count, MPI_Datatype datatype,
		   int dest, int tag, MPI_Comm comm, MPI_Request *request);
int MPI_Rsend_init(const void *buf, int count, MPI_Datatype datatype,
		   int dest, int tag, MPI_Comm comm, MPI_Request *request);
int MPI_Recv_init(void *buf, int count, MPI_Datatype datatype, int source,
		  int tag, MPI_Comm comm, MPI_Request *request);
int MPI_Start(MPI_Request *request);
int MPI_Startall(int count, MPI_Request array_of_requests[]);
/* Withdraws a receive nothing has matched yet; other requests run on. */
int MPI_Cancel(MPI_Request *request);
int MPI_Test_cancelled(const MPI_Status *status, int *flag);
int MPI_Send(const void *buf, int count, MPI_Datatype datatype, int dest,
	     int tag, MPI_Comm comm);
int MPI_Recv(void *buf, int count, MPI_Datatype datatype, int source,
	     int tag, MPI_Comm comm, MPI_Status *status);
int MPI_Isend(const void *buf, int count, MPI_Datatype datatype, int dest,
	      int tag, MPI_Comm comm, MPI_Request *request);
int MPI_Irecv(void *buf, int count, MPI_Datatype datatype, int source,
	      int tag, MPI_Comm comm, MPI_Request *request);
int MPI_Sendrecv(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
		 int dest, int sendtag, void *recvbuf, int recvcount,
		 MPI_Datatype recvtype, int source, int recvtag,
		 MPI_Comm comm, MPI_Status *status);
int MPI_Wait(MPI_Request *request, MPI_Status *status);
int MPI_Test(MPI_Request *request, int *flag, MPI_Status *status);
int MPI_Waitall(int count, MPI_Request requests[], MPI_Status statuses[]);
int MPI_Testall(int count, MPI_Request requests[], int *flag,
		MPI_Status statuses[]);
int MPI_Waitany(int count, MPI_Request requests[], int *index,
		MPI_Status *status);
int MPI_Request_free(MPI_Request *request);
int MPI_Probe(int source, int tag, MPI_Comm comm, MPI_Status *status);
int MPI_Iprobe(int source, int tag, MPI_Comm comm, int *flag,
	       MPI_Status *status);

/*
 * Buffered sends.  pcor copies what it still needs before a send returns,
 * so the attached buffer only has to exist; MPI_Buffer_detach waits for
 * the buffered sends still on their way.
 */
int MPI_Buffer_attach(void *buffer, int size);
int MPI_Buffer_detach(void *buffer_addr, int *size);
int MPI_Bsend(const void *buf, int count, MPI_Datatype datatype, int dest,
	      int tag, MPI_Comm comm);

/* Collectives (blocking). */
int MPI_Barrier(MPI_Comm comm);
int MPI_Bcast(void *buffer, int count, MPI_Datatype datatype, int root,
	      MPI_Comm comm);
int MPI_Reduce(const void *sendbuf, void *recvbuf, int count,
	       MPI_Datatype datatype, MPI_Op op, int root, MPI_Comm comm);
int MPI_Allreduce(const void *sendbuf, void *recvbuf, int count,
		  MPI_Datatype datatype, MPI_Op op, MPI_Comm comm);
int MPI_Gather(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
	       void *recvbuf, int recvcount, MPI_Datatype recvtype, int root,
	       MPI_Comm comm);
int MPI_Scatter(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
		void *recvbuf, int recvcount, MPI_Datatype recvtype, int root,
		MPI_Comm comm);
int MPI_Allgather(const void *sendbuf, int sendcount,
		  MPI_Datatype sendtype, void *recvbuf, int recvcount,
		  MPI_Datatype recvtype, MPI_Comm comm);
int MPI_Alltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
		 void *recvbuf, int recvcount, MPI_Datatype recvtype,
		 MPI_Comm comm);

int MPI_Gatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
		void *recvbuf, const int recvcounts[], const int displs[],
		MPI_Datatype recvtype, int root, MPI_Comm comm);
int MPI_Scatterv(const void *sendbuf, const int sendcounts[],
		 const int displs[], MPI_Datatype sendtype, void *recvbuf,
		 int recvcount, MPI_Datatype recvtype, int root,
		 MPI_Comm comm);
int MPI_Allgatherv(const void *sendbuf, int sendcount,
		   MPI_Datatype sendtype, void *recvbuf,
		   const int recvcounts[], const int displs[],
		   MPI_Datatype recvtype, MPI_Comm comm);
int MPI_Alltoallv(const void *sendbuf, const int sendcounts[],
		  const int sdispls[], MPI_Datatype sendtype, void *recvbuf,
		  const int recvcounts[], const int rdispls[],
		  MPI_Datatype recvtype, MPI_Comm comm);
int MPI_Reduce_scatter_block(const void *sendbuf, void *recvbuf,
			     int recvcount, MPI_Datatype datatype, MPI_Op op,
			     MPI_Comm comm);
int MPI_Reduce_scatter(const void *sendbuf, void *recvbuf,
		       const int recvcounts[], MPI_Datatype datatype,
		       MPI_Op op, MPI_Comm comm);
int MPI_Scan(const void *sendbuf, void *recvbuf, int count,
	     MPI_Datatype datatype, MPI_Op op, MPI_Comm comm);
int MPI_Exscan(const void *sendbuf, void *recvbuf, int count,
	       MPI_Datatype datatype, MPI_Op op, MPI_Comm comm);

/*
 * Nonblocking collectives: each returns a request that MPI_Test/Wait
 * (and the array forms) advance; buffers stay the operation's until it
 * completes.  Collectives on one communicator start in the same order
 * on every member.
 */
int MPI_Ibarrier(MPI_Comm comm, MPI_Request *request);
int MPI_Ibcast(void *buffer, int count, MPI_Datatype datatype, int root,
	       MPI_Comm comm, MPI_Request *request);
int MPI_Ireduce(const void *sendbuf, void *recvbuf, int count,
		MPI_Datatype datatype, MPI_Op op, int root, MPI_Comm comm,
		MPI_Request *request);
int MPI_Iallreduce(const void *sendbuf, void *recvbuf, int count,
		   MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
		   MPI_Request *request);
int MPI_Igather(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
		void *recvbuf, int recvcount, MPI_Datatype recvtype, int root,
		MPI_Comm comm, MPI_Request *request);
int MPI_Iscatter(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
		 void *recvbuf, int recvcount, MPI_Datatype recvtype,
		 int root, MPI_Comm comm, MPI_Request *request);
int MPI_Iallgather(const void *sendbuf, int sendcount,
		   MPI_Datatype sendtype, void *recvbuf, int recvcount,
		   MPI_Datatype recvtype, MPI_Comm comm,
		   MPI_Request *request);
int MPI_Ialltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
		  void *recvbuf, int recvcount, MPI_Datatype recvtype,
		  MPI_Comm comm, MPI_Request *request);

int MPI_Igatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
		 void *recvbuf, const int recvcounts[], const int displs[],
		 MPI_Datatype recvtype, int root, MPI_Comm comm,
		 MPI_Request *request);
int MPI_Iscatterv(const void *sendbuf, const int sendcounts[],
		  const int displs[], MPI_Datatype sendtype, void *recvbuf,
		  int recvcount, MPI_Datatype recvtype, int root,
		  MPI_Comm comm, MPI_Request *request);
int MPI_Iallgatherv(const void *sendbuf, int sendcount,
		    MPI_Datatype sendtype, void *recvbuf,
		    const int recvcounts[], const int displs[],
		    MPI_Datatype recvtype, MPI_Comm comm,
		    MPI_Request *request);
int MPI_Ialltoallv(const void *sendbuf, const int sendcounts[],
		   const int sdispls[], MPI_Datatype sendtype, void *recvbuf,
		   const int recvcounts[], const int rdispls[],
		   MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request);
int MPI_Ireduce_scatter_block(const void *sendbuf, void *recvbuf,
			      int recvcount, MPI_Datatype datatype,
			      MPI_Op op, MPI_Comm comm, MPI_Request *request);
int MPI_Ireduce_scatter(const void *sendbuf, void *recvbuf,
			const int recvcounts[], MPI_Datatype datatype,
			MPI_Op op, MPI_Comm comm, MPI_Request *request);

/*
 * Process topologies, kept beside a communicator; ranks are never
 * reordered.  Grids are row-major.
 */
int MPI_Dims_create(int nnodes, int ndims, int dims[]);
int MPI_Cart_create(MPI_Comm comm_old, int ndims, const int dims[],
		    const int periods[], int reorder, MPI_Comm *comm_cart);
int MPI_Cartdim_get(MPI_Comm comm, int *ndims);
int MPI_Cart_get(MPI_Comm comm, int maxdims, int dims[], int periods[],
		 int coords[]);
int MPI_Cart_coords(MPI_Comm comm, int rank, int maxdims, int coords[]);
int MPI_Cart_rank(MPI_Comm comm, const int coords[], int *rank);
int MPI_Cart_shift(MPI_Comm comm, int direction, int disp, int *rank_source,
		   int *rank_dest);
int MPI_Dist_graph_create_adjacent(MPI_Comm comm_old, int indegree,
				   const int sources[],
				   const int sourceweights[], int outdegree,
				   const int destinations[],
				   const int destweights[], MPI_Info info,
				   int reorder, MPI_Comm *comm_dist_graph);
int MPI_Dist_graph_neighbors_count(MPI_Comm comm, int *indegree,
				   int *outdegree, int *weighted);
int MPI_Dist_graph_neighbors(MPI_Comm comm, int maxindegree, int sources[],
			     int sourceweights[], int maxoutdegree,
			     int destinations[], int destweights[]);
int MPI_Topo_test(MPI_Comm comm, int *status);

/*
 * Neighbourhood collectives over a communicator's topology (grid: per
 * dimension the negative side, then the positive; graph: its edges), and
 * Alltoallw (displacements in bytes, a type per block).
 */
int MPI_Neighbor_allgather(const void *sendbuf, int sendcount,
			   MPI_Datatype sendtype, void *recvbuf,
			   int recvcount, MPI_Datatype recvtype,
			   MPI_Comm comm);
int MPI_Ineighbor_allgather(const void *sendbuf, int sendcount,
			    MPI_Datatype sendtype, void *recvbuf,
			    int recvcount, MPI_Datatype recvtype,
			    MPI_Comm comm, MPI_Request *request);
int MPI_Neighbor_allgatherv(const void *sendbuf, int sendcount,
			    MPI_Datatype sendtype, void *recvbuf,
			    const int recvcounts[], const int displs[],
			    MPI_Datatype recvtype, MPI_Comm comm);
int MPI_Ineighbor_allgatherv(const void *sendbuf, int sendcount,
			     MPI_Datatype sendtype, void *recvbuf,
			     const int recvcounts[], const int displs[],
			     MPI_Datatype recvtype, MPI_Comm comm,
			     MPI_Request *request);
int MPI_Neighbor_alltoall(const void *sendbuf, int sendcount,
			  MPI_Datatype sendtype, void *recvbuf, int recvcount,
			  MPI_Datatype recvtype, MPI_Comm comm);
int MPI_Ineighbor_alltoall(const void *sendbuf, int sendcount,
			   MPI_Datatype sendtype, void *recvbuf,
			   int recvcount, MPI_Datatype recvtype,
			   MPI_Comm comm, MPI_Request *request);
int MPI_Neighbor_alltoallv(const void *sendbuf, const int sendcounts[],
			   const int sdispls[], MPI_Datatype sendtype,
			   void *recvbuf, const int recvcounts[],
			   const int rdispls[], MPI_Datatype recvtype,
			   MPI_Comm comm);
int MPI_Ineighbor_alltoallv(const void *sendbuf, const int sendcounts[],
			    const int sdispls[], MPI_Datatype sendtype,
			    void *recvbuf, const int recvcounts[],
			    const int rdispls[], MPI_Datatype recvtype,
			    MPI_Comm comm, MPI_Request *request);
int MPI_Neighbor_alltoallw(const void *sendbuf, const int sendcounts[],
			   const MPI_Aint sdispls[],
			   const MPI_Datatype sendtypes[], void *recvbuf,
			   const int recvcounts[], const MPI_Aint rdispls[],
			   const MPI_Datatype recvtypes[], MPI_Comm comm);
int MPI_Ineighbor_alltoallw(const void *sendbuf, const int sendcounts[],
			    const MPI_Aint sdispls[],
			    const MPI_Datatype sendtypes[], void *recvbuf,
			    const int recvcounts[], const MPI_Aint rdispls[],
			    const MPI_Datatype recvtypes[], MPI_Comm comm,
			    MPI_Request *request);
int MPI_Alltoallw(const void *sendbuf, const int sendcounts[],
		  const int sdispls[], const MPI_Datatype sendtypes[],
		  void *recvbuf, const int recvcounts[], const int rdispls[],
		  const MPI_Datatype recvtypes[], MPI_Comm comm);
int MPI_Ialltoallw(const void *sendbuf, const int sendcounts[],
		   const int sdispls[], const MPI_Datatype sendtypes[],
		   void *recvbuf, const int recvcounts[], const int rdispls[],
		   const MPI_Datatype recvtypes[], MPI_Comm comm,
		   MPI_Request *request);

/*
 * Windows: created, allocated, attached, fenced and freed (collective
 * over their communicator).  Put/Get/Accumulate and locks are not
 * provided, so a window only marks memory for now.
 */
int MPI_Win_create(void *base, MPI_Aint size, int disp_unit, MPI_Info info,
		   MPI_Comm comm, MPI_Win *win);
int MPI_Win_allocate(MPI_Aint size, int disp_unit, MPI_Info info,
		     MPI_Comm comm, void *baseptr, MPI_Win *win);
int MPI_Win_create_dynamic(MPI_Info info, MPI_Comm comm, MPI_Win *win);
int MPI_Win_attach(MPI_Win win, void *base, MPI_Aint size);
int MPI_Win_detach(MPI_Win win, const void *base);
int MPI_Win_fence(int assert, MPI_Win win);
int MPI_Win_free(MPI_Win *win);
int MPI_Win_set_errhandler(MPI_Win win, MPI_Errhandler errhandler);

/* User reduction operations (applied in rank order, commutative or not). */
typedef void MPI_User_function(void *invec, void *inoutvec, int *len,
			       MPI_Datatype *datatype);
int MPI_Op_create(MPI_User_function *user_fn, int commute, MPI_Op *op);
int MPI_Op_free(MPI_Op *op);

#ifdef __cplusplus
}
#endif

#endif /* PCOR_MPI_H */
