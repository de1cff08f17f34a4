/*
 * nsa_config_key.h - the rows of a configuration key table, and what the
 * parser does with one value. The agent's own table is in
 * nsa_config_keys.c; a program adds its own sections with a table of the
 * same rows (gateway/ngw_config.c).
 */
#ifndef NSA_CONFIG_KEY_H
#define NSA_CONFIG_KEY_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "nsa_config.h"

enum nsa_key_kind {
	NSA_KEY_NUM, /* unsigned decimal in [min, max] */
	NSA_KEY_POW2, /* NSA_KEY_NUM that must also be a power of two */
	NSA_KEY_BOOL, /* yes|no|true|false|1|0, stored as int 1/0 */
	NSA_KEY_ENUM, /* one of names[], stored as its index */
	NSA_KEY_STR, /* text, at most size - 1 bytes */
	NSA_KEY_SEEDS, /* host:port list, stored in a struct nsa_store_conf */
	NSA_KEY_IPV4, /* dotted quad as a host-order uint32_t; "" = 0 */
	NSA_KEY_IPV4_RANGE, /* A.B.C.D[-E.F.G.H] as two host-order uint32_t
			       (first, last), at most max addresses; "" = 0 */
	NSA_KEY_PORT_RANGE, /* LO-HI as two uint16_t, min <= LO <= HI <= max */
};

struct nsa_key {
	const char *section;
	const char *key;
	enum nsa_key_kind kind;
	size_t offset; /* from the start of the struct nsa_config */
	size_t size;
	uint64_t min, max;
	const char *const *names; /* NSA_KEY_ENUM: NULL-terminated */
	const char *def; /* default, parsed like a file value */
	const char *help; /* one or two sentences for the reference */
};

/* Keys in print order: a section appears where its first key is. */
struct nsa_key_table {
	const struct nsa_key *keys;
	size_t n_keys;
	/* Bytes of the struct the offsets count in: sizeof(struct
	 * nsa_config), or a program's struct that begins with one. */
	size_t size;
	/* Fields that follow from other keys; run by nsa_config_defaults*
	 * and nsa_config_finish. May be NULL. */
	void (*derive)(struct nsa_config *c);
};

/* The range kinds store a pair of adjacent fields through one offset. */
#define NSA_ADJACENT(type, a, b) \
	(offsetof(type, b) == offsetof(type, a) + sizeof(((type *)0)->a))

/* Rows of a table. The file defining one sets NSA_KEY_STRUCT to the struct
 * its fields are in. One row per key: clang-format would spread each
 * macro over four lines. */
/* clang-format off */
#define NSA_FIELD(f) \
	offsetof(NSA_KEY_STRUCT, f), sizeof(((NSA_KEY_STRUCT *)0)->f)
#define NSA_FIELD_PAIR(a, b) \
	offsetof(NSA_KEY_STRUCT, a), \
	offsetof(NSA_KEY_STRUCT, b) + sizeof(((NSA_KEY_STRUCT *)0)->b) - \
		offsetof(NSA_KEY_STRUCT, a)
#define NSA_NUM(sec, name, f, lo, hi, def, help) \
	{ sec, name, NSA_KEY_NUM, NSA_FIELD(f), lo, hi, NULL, def, help }
#define NSA_POW2(sec, name, f, lo, hi, def, help) \
	{ sec, name, NSA_KEY_POW2, NSA_FIELD(f), lo, hi, NULL, def, help }
#define NSA_BOOL(sec, name, f, def, help) \
	{ sec, name, NSA_KEY_BOOL, NSA_FIELD(f), 0, 1, NULL, def, help }
#define NSA_ENUM(sec, name, f, names, def, help) \
	{ sec, name, NSA_KEY_ENUM, NSA_FIELD(f), 0, 0, names, def, help }
#define NSA_STR(sec, name, f, def, help) \
	{ sec, name, NSA_KEY_STR, NSA_FIELD(f), 0, 0, NULL, def, help }
#define NSA_SEEDS(sec, name, f, def, help) \
	{ sec, name, NSA_KEY_SEEDS, NSA_FIELD(f), 0, 0, NULL, def, help }
#define NSA_IPV4(sec, name, f, def, help) \
	{ sec, name, NSA_KEY_IPV4, NSA_FIELD(f), 0, 0, NULL, def, help }
#define NSA_IPV4_RANGE(sec, name, a, b, most, def, help) \
	{ sec, name, NSA_KEY_IPV4_RANGE, NSA_FIELD_PAIR(a, b), 1, most, NULL, def, help }
#define NSA_PORT_RANGE(sec, name, a, b, lo, hi, def, help) \
	{ sec, name, NSA_KEY_PORT_RANGE, NSA_FIELD_PAIR(a, b), lo, hi, NULL, def, help }
/* clang-format on */

/* The agent's own keys: [agent] [store] [active] [rings] [source]
 * [standby]. */
extern const struct nsa_key_table nsa_config_keys;

/* Validate v for k and store it at base + k->offset; on error nothing is
 * stored and why holds the reason. */
int nsa_key_parse(const struct nsa_key *k, void *base, const char *v, char *why,
		  size_t whylen);

/* Print the value stored for k in its file form; "" for an empty one. */
void nsa_key_print(const struct nsa_key *k, const void *base, FILE *out);

/* 1 when k's value prints as nothing: an empty text, an unset address. */
int nsa_key_is_empty(const struct nsa_key *k, const void *base);

/* What k accepts, in Markdown, for the reference. */
void nsa_key_describe(const struct nsa_key *k, char *buf, size_t len);

/* addr (host byte order) as a dotted quad. */
void nsa_format_ipv4(uint32_t addr, char *buf, size_t len);

#endif
