/*
 * knobs.c -- the table of PCOR_* environment variables and its parser.
 * The table is generated from PCORI_KNOBS in core.h: one declaration per
 * knob, read here, printed by pcor_info.  A variable that is unset or
 * set to the empty string takes the knob's default.
 */
#include "core.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>

const pcori_knob_t pcori_knobs[] = {
#define PCORI_KNOB_ROW_(N, f, t, d, mn, mx, h)                                 \
	{#N, PCORI_KNOB_##t, d, mn, mx, h, offsetof(pcori_config_t, f)},
	PCORI_KNOBS(PCORI_KNOB_ROW_)
#undef PCORI_KNOB_ROW_
};
const size_t pcori_nknobs = PCORI_ARRAY_LEN(pcori_knobs);

int pcori_parse_size(const char *s, int64_t *out)
{
	char *end;
	if (!s || !*s || !isdigit((unsigned char)*s))
		return -1;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno)
		return -1;
	int shift = 0;
	switch (tolower((unsigned char)*end)) {
	case '\0':
		break;
	case 'k':
		shift = 10;
		break;
	case 'm':
		shift = 20;
		break;
	case 'g':
		shift = 30;
		break;
	case 't':
		shift = 40;
		break;
	default:
		return -1;
	}
	if (*end && end[1] != '\0' &&
	    !(tolower((unsigned char)end[1]) == 'b' && end[2] == '\0') &&
	    !(tolower((unsigned char)end[1]) == 'i' &&
	      tolower((unsigned char)end[2]) == 'b' && end[3] == '\0'))
		return -1;
	if (v > ((unsigned long long)INT64_MAX >> shift))
		return -1;
	*out = (int64_t)(v << shift);
	return 0;
}

static int parse_int(const char *s, int64_t *out)
{
	char *end;
	if (!s || !*s)
		return -1;
	errno = 0;
	long long v = strtoll(s, &end, 10);
	if (errno || *end)
		return -1;
	*out = v;
	return 0;
}

static int knob_set(pcori_config_t *cfg, const pcori_knob_t *k,
		    const char *val)
{
	char *field = (char *)cfg + k->offset;
	int64_t v;
	switch (k->type) {
	case PCORI_KNOB_STRING:
		if (strlen(val) >= 256)
			return -1;
		strcpy(field, val);
		return 0;
	case PCORI_KNOB_INT:
		if (parse_int(val, &v))
			return -1;
		break;
	case PCORI_KNOB_SIZE:
		if (pcori_parse_size(val, &v))
			return -1;
		break;
	default:
		return -1;
	}
	if (v < k->min || v > k->max)
		return -1;
	memcpy(field, &v, sizeof(v));
	return 0;
}

int pcori_config_load(pcori_config_t *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	for (size_t i = 0; i < pcori_nknobs; i++) {
		const pcori_knob_t *k = &pcori_knobs[i];
		char env[64];
		snprintf(env, sizeof(env), "PCOR_%s", k->name);
		if (knob_set(cfg, k, k->defval))
			pcori_panic(__FILE__, __LINE__, "bad knob default");
		const char *val = getenv(env);
		/*
		 * Set but empty ("PCOR_X=") means the default, as an unset
		 * variable does: scripts often clear a knob that way.
		 */
		if (val && !*val)
			val = NULL;
		if (val && knob_set(cfg, k, val)) {
			/* Logging is not set up yet: say it on stderr. */
			if (k->type == PCORI_KNOB_STRING)
				fprintf(stderr, "pcor: %s: value too long\n",
					env);
			else
				fprintf(stderr,
					"pcor: %s=\"%s\": not a valid value "
					"(range %" PRId64 "..%" PRId64 ")\n",
					env, val, k->min, k->max);
			return PCOR_ERR_INVAL;
		}
	}
	return PCOR_OK;
}

void pcori_config_format(const pcori_config_t *cfg, const pcori_knob_t *k,
			 char *buf, size_t len)
{
	const char *field = (const char *)cfg + k->offset;
	int64_t v;
	if (k->type == PCORI_KNOB_STRING) {
		snprintf(buf, len, "%s", field);
		return;
	}
	memcpy(&v, field, sizeof(v));
	snprintf(buf, len, "%" PRId64, v);
}
