/*
 * dlsym -- the paper's calls are real exported functions of libpcor:
 * dlopen the library (this program is not linked with it), find each of
 * sendCopy, sendDMA, recvCopy, recvDMA and testHandle with dlsym, check
 * the symbol is a global function of libpcor, and use them all through
 * the pointers found.  Private symbols stay hidden.
 *
 *   dlsym PATH-TO-LIBPCOR
 */
#include "../common.h"

#include <dlfcn.h>
#include <elf.h>
#include <link.h>

static void *lib;

/* Not linked with libpcor: CHECK_RC names statuses through the library
 * found by dlopen. */
static const char *(*p_status_name)(int);

static const char *status_name(int st)
{
	return p_status_name ? p_status_name(st) : "?";
}
#define pcor_status_name status_name

static void *find(const char *name)
{
	void *sym = dlsym(lib, name);
	if (!sym) {
		fprintf(stderr, "dlsym %s: %s\n", name, dlerror());
		CHECK(!"symbol not exported");
	}
	/* A function symbol, global, of libpcor itself. */
	Dl_info info;
	const ElfW(Sym) *es = NULL;
	CHECK(dladdr1(sym, &info, (void **)&es, RTLD_DL_SYMENT) != 0);
	CHECK(es != NULL);
	CHECK(info.dli_sname && !strcmp(info.dli_sname, name));
	CHECK(ELF64_ST_TYPE(es->st_info) == STT_FUNC);
	CHECK(ELF64_ST_BIND(es->st_info) == STB_GLOBAL);
	CHECK(info.dli_fname && strstr(info.dli_fname, "libpcor") != NULL);
	return sym;
}

int main(int argc, char **argv)
{
	CHECK(argc == 2);
	/* Not linked in: the symbols must come from this dlopen. */
	CHECK(dlsym(RTLD_DEFAULT, "sendCopy") == NULL);
	lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
	if (!lib)
		fprintf(stderr, "dlopen: %s\n", dlerror());
	CHECK(lib != NULL);

	p_status_name = find("pcor_status_name");
	int (*p_sendCopy)(int, int, int, void *, int) = find("sendCopy");
	int (*p_sendDMA)(int, int, int, void *, int) = find("sendDMA");
	int (*p_recvCopy)(int, int, int, void *, int, int *, int *, int *,
			  int *) = find("recvCopy");
	int (*p_recvDMA)(int, int, int, void **, int *, int *, int *,
			 int *) = find("recvDMA");
	int (*p_testHandle)(int, int) = find("testHandle");
	int (*p_init)(int *, char ***) = find("pcor_init");
	int (*p_finalize)(void) = find("pcor_finalize");
	int (*p_self_thid)(void) = find("pcor_self_thid");
	int (*p_dma_alloc)(size_t, void **) = find("pcor_dma_alloc");
	int (*p_dma_free)(void *) = find("pcor_dma_free");
	/* The library's insides are not for dlsym. */
	const char *hidden[] = {"pcori_req_alloc", "pcori_dma_check",
				"pcori_local_send", "pcori_api_recv",
				"pcori_rt", "pcori_msg"};
	for (size_t i = 0; i < TH_LEN(hidden); i++)
		CHECK(dlsym(lib, hidden[i]) == NULL);

	/* Each call through its paper signature. */
	CHECK_RC(p_testHandle(1, PCOR_BLOCK), PCOR_ERR_NOTINIT);
	CHECK_OK(p_init(&argc, &argv));
	int me = p_self_thid();
	CHECK(me == 0);
	char out[32], in[32] = "";
	strcpy(out, "through dlsym");
	int apid = -1, athid = -1, atag = -1, asize = -1;
	int rh = p_recvCopy(0, me, 4, in, (int)sizeof(in), &apid, &athid,
			    &atag, &asize);
	CHECK(rh > 0);
	CHECK_RC(p_testHandle(rh, PCOR_NONBLOCK), PCOR_INPROGRESS);
	int sh = p_sendCopy(0, me, 4, out, (int)strlen(out) + 1);
	CHECK(sh > 0);
	CHECK_OK(p_testHandle(sh, PCOR_BLOCK));
	CHECK_OK(p_testHandle(rh, PCOR_BLOCK));
	CHECK(!strcmp(in, "through dlsym"));
	CHECK(apid == 0 && athid == me && atag == 4 &&
	      asize == (int)strlen(out) + 1);

	void *d, *got = NULL;
	CHECK_OK(p_dma_alloc(64, &d));
	memcpy(d, "dma", 4);
	sh = p_sendDMA(0, me, 5, d, 4);
	CHECK(sh > 0);
	rh = p_recvDMA(0, me, 5, &got, &apid, &athid, &atag, &asize);
	CHECK(rh > 0);
	CHECK_OK(p_testHandle(rh, PCOR_BLOCK));
	CHECK_OK(p_testHandle(sh, PCOR_BLOCK));
	CHECK(got != NULL && !strcmp(got, "dma"));
	CHECK(atag == 5 && asize == 4);
	CHECK_OK(p_dma_free(got));
	CHECK_OK(p_dma_free(d));
	CHECK_RC(p_sendCopy(0, me, 1, out, -1), PCOR_ERR_BADSIZE);
	CHECK_OK(p_finalize());
	CHECK_RC(p_testHandle(1, PCOR_BLOCK), PCOR_ERR_FINALIZED);
	CHECK(dlclose(lib) == 0);
	return 0;
}
