/*
 * auth.c -- the job key and what is derived from it.
 *
 * All cryptography is libsodium's: the key comes from its CSPRNG, the
 * challenge-response and the wire check are HMAC-SHA-256, and MACs are
 * compared in constant time by the callers (sodium_memcmp).
 */
#include "naming_priv.h"

#include <sodium.h>

int pcori_crypto_init(void)
{
	/* Safe to call more than once; returns 1 when already done. */
	return sodium_init() < 0 ? PCOR_ERR_SYSTEM : PCOR_OK;
}

void pcori_key_random(uint8_t key[PCORI_KEY_BYTES])
{
	randombytes_buf(key, PCORI_KEY_BYTES);
}

void pcori_key_to_hex(const uint8_t key[PCORI_KEY_BYTES],
		      char hex[2 * PCORI_KEY_BYTES + 1])
{
	sodium_bin2hex(hex, 2 * PCORI_KEY_BYTES + 1, key, PCORI_KEY_BYTES);
}

int pcori_key_from_hex(const char *hex, uint8_t key[PCORI_KEY_BYTES])
{
	size_t n = 0;
	const char *end = NULL;
	if (strlen(hex) != 2 * PCORI_KEY_BYTES)
		return -1;
	if (sodium_hex2bin(key, PCORI_KEY_BYTES, hex, 2 * PCORI_KEY_BYTES,
			   NULL, &n, &end) != 0 ||
	    n != PCORI_KEY_BYTES || *end)
		return -1;
	return 0;
}

void pcori_mac(const uint8_t key[PCORI_KEY_BYTES], char label,
	       const uint8_t *a, const uint8_t *b, uint8_t out[PCORI_MAC_BYTES])
{
	crypto_auth_hmacsha256_state st;
	crypto_auth_hmacsha256_init(&st, key, PCORI_KEY_BYTES);
	/* The label keeps the two directions' proofs from being replayed. */
	crypto_auth_hmacsha256_update(&st, (const uint8_t *)&label, 1);
	if (a)
		crypto_auth_hmacsha256_update(&st, a, PCORI_NONCE_BYTES);
	if (b)
		crypto_auth_hmacsha256_update(&st, b, PCORI_NONCE_BYTES);
	crypto_auth_hmacsha256_final(&st, out);
	sodium_memzero(&st, sizeof(st));
}

uint32_t pcori_key_check(const uint8_t key[PCORI_KEY_BYTES])
{
	static const uint8_t wire[] = "wire";
	uint8_t mac[crypto_auth_hmacsha256_BYTES];
	crypto_auth_hmacsha256_state st;
	crypto_auth_hmacsha256_init(&st, key, PCORI_KEY_BYTES);
	crypto_auth_hmacsha256_update(&st, wire, 4);
	crypto_auth_hmacsha256_final(&st, mac);
	return (uint32_t)mac[0] << 24 | (uint32_t)mac[1] << 16 |
	       (uint32_t)mac[2] << 8 | mac[3];
}
