/*
 * knobs -- the PCOR_* environment knobs: size parsing with k/m/g, the
 * ranges of the table, defaults, and pcor_init refusing a bad value with
 * PCOR_ERR_INVAL while leaving the process uninitialised, and a variable
 * set to the empty string meaning its default.
 *
 * This program changes its own environment; it is its own test binary so
 * no other test sees that.
 */
#include "core/core.h"

#include "../common.h"

#include <inttypes.h>

static void test_parse_size(void)
{
	static const struct {
		const char *s;
		int64_t v;
	} good[] = {
		{"0", 0},
		{"12", 12},
		{"1k", 1024},
		{"64k", 65536},
		{"2m", 2 << 20},
		{"1g", 1 << 30},
		{"3g", 3ll << 30},
		{"9223372036854775807", INT64_MAX},
		{"8589934591g", 8589934591ll << 30},
	};
	for (size_t i = 0; i < PCORI_ARRAY_LEN(good); i++) {
		int64_t v = -7;
		if (pcori_parse_size(good[i].s, &v) != 0 || v != good[i].v) {
			fprintf(stderr, "\"%s\" -> %" PRId64 "\n", good[i].s,
				v);
			CHECK(!"a valid size was refused or misread");
		}
	}
	static const char *const bad[] = {
		"",
		"k",
		"-1",
		"+1",
		" 1",
		"1 ",
		"1x",
		"1kk",
		"1.5k",
		"0x10",
		"1k5",
		"9223372036854775808",      /* INT64_MAX + 1 */
		"99999999999999999999999",  /* beyond 64 bits */
		"8589934592g",              /* 2^63 */
		"9007199254740992k",        /* 2^63 */
	};
	for (size_t i = 0; i < PCORI_ARRAY_LEN(bad); i++) {
		int64_t v = -7;
		if (pcori_parse_size(bad[i], &v) != -1 || v != -7) {
			fprintf(stderr, "\"%s\" accepted\n", bad[i]);
			CHECK(!"an invalid size was accepted");
		}
	}
	CHECK(pcori_parse_size(NULL, &(int64_t){0}) == -1);
}

static const pcori_knob_t *knob(const char *name)
{
	for (size_t i = 0; i < pcori_nknobs; i++)
		if (!strcmp(pcori_knobs[i].name, name))
			return &pcori_knobs[i];
	CHECK(!"no such knob");
	return NULL;
}

static int64_t field(const pcori_config_t *cfg, const pcori_knob_t *k)
{
	int64_t v;
	memcpy(&v, (const char *)cfg + k->offset, sizeof(v));
	return v;
}

static void env_set(const pcori_knob_t *k, const char *val)
{
	char name[64];
	snprintf(name, sizeof(name), "PCOR_%s", k->name);
	if (val)
		CHECK(setenv(name, val, 1) == 0);
	else
		CHECK(unsetenv(name) == 0);
}

/* Load with one knob set; the status, and the value when it loaded. */
static int load_with(const pcori_knob_t *k, const char *val, int64_t *v_p)
{
	pcori_config_t cfg;
	env_set(k, val);
	int rc = pcori_config_load(&cfg);
	env_set(k, NULL);
	if (rc == PCOR_OK && v_p)
		*v_p = field(&cfg, k);
	return rc;
}

static void test_table(void)
{
	CHECK(pcori_nknobs > 0);
	for (size_t i = 0; i < pcori_nknobs; i++)
		env_set(&pcori_knobs[i], NULL);
	pcori_config_t def;
	CHECK_OK(pcori_config_load(&def));

	for (size_t i = 0; i < pcori_nknobs; i++) {
		const pcori_knob_t *k = &pcori_knobs[i];
		char buf[300];
		int64_t v;
		/* Names are unique. */
		for (size_t j = 0; j < i; j++)
			CHECK(strcmp(pcori_knobs[j].name, k->name) != 0);
		CHECK(k->help && *k->help);
		if (k->type == PCORI_KNOB_STRING) {
			pcori_config_format(&def, k, buf, sizeof(buf));
			CHECK(!strcmp(buf, k->defval));
			/* 255 characters fit, 256 do not. */
			char s[300];
			memset(s, 'a', 256);
			s[256] = '\0';
			CHECK_RC(load_with(k, s, NULL), PCOR_ERR_INVAL);
			/* Set but empty is the default. */
			pcori_config_t e;
			env_set(k, "");
			CHECK_OK(pcori_config_load(&e));
			env_set(k, NULL);
			pcori_config_format(&e, k, buf, sizeof(buf));
			CHECK(!strcmp(buf, k->defval));
			s[255] = '\0';
			if (strcmp(k->name, "LOG_FILE") != 0) /* not opened here */
				CHECK_OK(load_with(k, s, NULL));
			continue;
		}
		/* The default is what an unset variable gives. */
		int64_t d;
		if (k->type == PCORI_KNOB_SIZE)
			CHECK(pcori_parse_size(k->defval, &d) == 0);
		else
			d = strtoll(k->defval, NULL, 10);
		CHECK(field(&def, k) == d);
		CHECK(d >= k->min && d <= k->max);
		/* Both ends of the range are accepted, one past is not. */
		snprintf(buf, sizeof(buf), "%" PRId64, k->min);
		CHECK_OK(load_with(k, buf, &v));
		CHECK(v == k->min);
		snprintf(buf, sizeof(buf), "%" PRId64, k->max);
		CHECK_OK(load_with(k, buf, &v));
		CHECK(v == k->max);
		snprintf(buf, sizeof(buf), "%" PRId64, k->min - 1);
		CHECK_RC(load_with(k, buf, NULL), PCOR_ERR_INVAL);
		snprintf(buf, sizeof(buf), "%" PRId64, k->max + 1);
		CHECK_RC(load_with(k, buf, NULL), PCOR_ERR_INVAL);
		/* Set but empty is the default, not an error. */
		v = d + 1;
		CHECK_OK(load_with(k, "", &v));
		CHECK(v == d);
		CHECK_RC(load_with(k, "12abc", NULL), PCOR_ERR_INVAL);
		/* Size suffixes apply to size knobs only. */
		int rc = load_with(k, "64k", &v);
		if (k->type == PCORI_KNOB_SIZE) {
			if (65536 >= k->min && 65536 <= k->max) {
				CHECK_OK(rc);
				CHECK(v == 65536);
			} else {
				CHECK_RC(rc, PCOR_ERR_INVAL);
			}
		} else {
			CHECK_RC(rc, PCOR_ERR_INVAL);
		}
	}
	CHECK_OK(load_with(knob("FRAG_SIZE"), "2m", &(int64_t){0}));
	int64_t v = 0;
	CHECK_OK(load_with(knob("DMA_RESERVE"), "1g", &v));
	CHECK(v == 1 << 30);
	CHECK_OK(load_with(knob("UNEXP_BYTES"), "3m", &v));
	CHECK(v == 3 << 20);
}

/* pcor_init with one bad knob: INVAL, and still not initialised. */
static void test_init_refuses(void)
{
	static const struct {
		const char *name, *val;
	} bad[] = {
		{"MCB_POOL", "15"},
		{"MCB_POOL", "many"},
		{"MAX_THREADS", "0"},
		{"MAX_THREADS", "65537"},
		{"MAX_HANDLES", "1023"},
		{"FRAG_SIZE", "1023"},
		{"FRAG_SIZE", "17m"},
		{"FRAG_SIZE", "1q"},
		{"DMA_RESERVE", "1m"},
		{"BACKPRESSURE_MS", "-1"},
		{"SPIN_NS", "1e3"},
		{"UNEXP_BYTES", "-5"},
		{"LOG_LEVEL", "loud"},
		{"LOG_SUBSYS", "core,nope"},
		{"LOG_FILE", "/nonexistent-dir/pcor.log"},
	};
	for (size_t i = 0; i < PCORI_ARRAY_LEN(bad); i++) {
		char name[64];
		snprintf(name, sizeof(name), "PCOR_%s", bad[i].name);
		CHECK(setenv(name, bad[i].val, 1) == 0);
		int rc = pcor_init(NULL, NULL);
		CHECK(unsetenv(name) == 0);
		if (rc != PCOR_ERR_INVAL)
			fprintf(stderr, "%s=%s\n", name, bad[i].val);
		CHECK_RC(rc, PCOR_ERR_INVAL);
		CHECK_RC(pcor_self_pid(), PCOR_ERR_NOTINIT);
		CHECK_RC(pcor_finalize(), PCOR_ERR_NOTINIT);
	}
	/* After all those refusals a good configuration starts and is used. */
	CHECK(setenv("PCOR_MAX_THREADS", "77", 1) == 0);
	CHECK(setenv("PCOR_FRAG_SIZE", "2m", 1) == 0);
	CHECK(setenv("PCOR_LOG_SUBSYS", "core,frag", 1) == 0);
	/* Empty knobs mean their defaults: pcor_init starts with them. */
	CHECK(setenv("PCOR_PROVIDERS", "", 1) == 0);
	CHECK(setenv("PCOR_MCB_POOL", "", 1) == 0);
	CHECK(setenv("PCOR_DISPATCH", "", 1) == 0);
	CHECK_OK(pcor_init(NULL, NULL));
	CHECK(!strcmp(pcori_rt.cfg.providers, "pcor-shm,net"));
	CHECK(pcori_rt.cfg.mcb_pool == 65536);
	CHECK(pcor_max_threads() == 77);
	CHECK(pcori_rt.cfg.frag_size == 2 << 20);
	CHECK(pcor_self_thid() == 0);
	CHECK_OK(pcor_finalize());
}

int main(void)
{
	test_parse_size();
	test_table();
	test_init_refuses();
	return 0;
}
