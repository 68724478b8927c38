/*
 * pcor_info -- print pcor's version and every knob (environment
 * variable) with its type, default, current value and help.
 */
#include "core/core.h"

#include <inttypes.h>

static void usage(FILE *f)
{
	fprintf(f, "usage: pcor_info [-k | --knobs] [-h | --help]\n"
		   "  -k, --knobs  list the PCOR_* environment variables "
		   "(default)\n");
}

static const char *type_name(pcori_knob_type_t t)
{
	switch (t) {
	case PCORI_KNOB_INT:
		return "int";
	case PCORI_KNOB_SIZE:
		return "size";
	case PCORI_KNOB_STRING:
		return "string";
	}
	return "?";
}

int main(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			usage(stdout);
			return 0;
		}
		if (strcmp(argv[i], "-k") && strcmp(argv[i], "--knobs")) {
			usage(stderr);
			return 2;
		}
	}
	pcori_config_t cfg;
	int rc = pcori_config_load(&cfg);
	printf("pcor %d.%d.%d\n\n", PCOR_VERSION_MAJOR, PCOR_VERSION_MINOR,
	       PCOR_VERSION_PATCH);
	for (size_t i = 0; i < pcori_nknobs; i++) {
		const pcori_knob_t *k = &pcori_knobs[i];
		char cur[300];
		if (rc == PCOR_OK)
			pcori_config_format(&cfg, k, cur, sizeof(cur));
		else
			snprintf(cur, sizeof(cur), "(environment invalid)");
		printf("# %s\n", k->help);
		if (k->type == PCORI_KNOB_STRING)
			printf("# type: %s, default: \"%s\"\n",
			       type_name(k->type), k->defval);
		else
			printf("# type: %s, default: %s, range: %" PRId64
			       "..%" PRId64 "\n",
			       type_name(k->type), k->defval, k->min, k->max);
		printf("PCOR_%s=%s\n\n", k->name, cur);
	}
	return rc == PCOR_OK ? 0 : 1;
}
