/*
 * nsdp_klive.c - the set of conntrack entries the kernel session source
 * has sent as live (nsdp_klive.h).
 *
 * Invariants:
 * - A slot with proto 0 is empty (the source keeps TCP, UDP and ICMP
 *   only). Every entry sits at or after its home slot (hash & mask) with
 *   no empty slot between: linear probing, and removal shifts the entries
 *   after a hole back into it (no tombstones), so a lookup stops at the
 *   first empty slot.
 * - count <= 3/4 of the slots: the set doubles before it would pass
 *   that, and refuses (-ENOSPC) once doubling would pass the bound.
 * - After nsdp_klive_begin, an entry carries the new generation only if
 *   nsdp_klive_add saw it since; nsdp_klive_sweep removes all others.
 * - The hash is seeded at random per set: the tuples come from the
 *   network, and a chosen set of them must not pile up in one run.
 *
 * Not here: what is a dump or a live record (nsdp_ksrc.c).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "nsdp_klive.h"

#define KLIVE_MIN_SLOTS 4096u

/* An entry's identity as the records carry it, and its generation. */
struct klive_slot {
	struct nsdp_kern_tuple orig, reply;
	__u16 zone;
	__u8 proto; /* 0: empty */
	__u8 family;
	uint32_t gen;
};

_Static_assert(sizeof(struct klive_slot) == 80, "a slot is 80 bytes");

struct nsdp_klive {
	struct klive_slot *slot;
	uint32_t mask; /* slots - 1 */
	uint32_t bound; /* slots at most */
	uint64_t count;
	uint32_t gen;
	uint64_t seed;
};

static uint64_t mix(uint64_t h, uint64_t w)
{
	h ^= w;
	h *= 0x9e3779b97f4a7c15ULL;
	return h ^ (h >> 32);
}

static uint32_t slot_hash(const struct nsdp_klive *l,
			  const struct klive_slot *s)
{
	uint64_t h = l->seed;

	h = mix(h, (uint64_t)s->orig.src << 32 | s->orig.dst);
	h = mix(h, (uint64_t)s->orig.sport << 16 | s->orig.dport);
	h = mix(h, (uint64_t)s->reply.src << 32 | s->reply.dst);
	h = mix(h, (uint64_t)s->reply.sport << 16 | s->reply.dport);
	h = mix(h,
		(uint64_t)s->family << 24 | (uint64_t)s->zone << 8 | s->proto);
	/* IPv6: the rest of the addresses (zero for IPv4). */
	for (int i = 1; i < 4; i++) {
		h = mix(h, (uint64_t)s->orig.src6[i] << 32 | s->orig.dst6[i]);
		h = mix(h, (uint64_t)s->reply.src6[i] << 32 | s->reply.dst6[i]);
	}
	/* splitmix64's finaliser: every bit of the words reaches the low
	 * bits the mask keeps. */
	h ^= h >> 30;
	h *= 0xbf58476d1ce4e5b9ULL;
	h ^= h >> 27;
	h *= 0x94d049bb133111ebULL;
	return (uint32_t)(h ^ (h >> 31));
}

static void key_to_slot(const struct nsdp_kern_key *key, struct klive_slot *s)
{
	memset(s, 0, sizeof(*s));
	s->orig = key->orig;
	s->reply = key->reply;
	s->zone = key->zone;
	s->proto = key->proto;
	s->family = key->family;
}

static int same_entry(const struct klive_slot *a, const struct klive_slot *b)
{
	return memcmp(a, b, offsetof(struct klive_slot, gen)) == 0;
}

/* The slot holding s, or the empty slot where it belongs. */
static uint32_t find(const struct nsdp_klive *l, const struct klive_slot *s)
{
	uint32_t i = slot_hash(l, s) & l->mask;

	while (l->slot[i].proto && !same_entry(&l->slot[i], s))
		i = (i + 1) & l->mask;
	return i;
}

/* The power of two at or above n, from KLIVE_MIN_SLOTS to 2^31. */
static uint32_t slots_for(uint64_t n)
{
	uint64_t slots = KLIVE_MIN_SLOTS;

	while (slots < n && slots < (1ULL << 31))
		slots <<= 1;
	return (uint32_t)slots;
}

uint32_t nsdp_klive_bound_for(uint64_t max_entries)
{
	return slots_for(2 * max_entries);
}

struct nsdp_klive *nsdp_klive_create(uint32_t bound_slots)
{
	struct nsdp_klive *l = calloc(1, sizeof(*l));

	if (!l)
		return NULL;
	l->slot = calloc(KLIVE_MIN_SLOTS, sizeof(*l->slot));
	if (!l->slot) {
		free(l);
		return NULL;
	}
	l->mask = KLIVE_MIN_SLOTS - 1;
	l->bound = KLIVE_MIN_SLOTS;
	nsdp_klive_set_bound(l, bound_slots);
	if (getrandom(&l->seed, sizeof(l->seed), GRND_NONBLOCK) !=
	    sizeof(l->seed))
		l->seed = (uint64_t)time(NULL) * 0x2545f4914f6cdd1dULL;
	return l;
}

void nsdp_klive_free(struct nsdp_klive *l)
{
	if (!l)
		return;
	free(l->slot);
	free(l);
}

void nsdp_klive_set_bound(struct nsdp_klive *l, uint32_t bound_slots)
{
	uint32_t b = slots_for(bound_slots);

	if (b > l->bound)
		l->bound = b;
}

/* Double the slots; -ENOMEM leaves the set as it was. */
static int grow(struct nsdp_klive *l)
{
	uint32_t slots = 2 * (l->mask + 1);
	struct klive_slot *old = l->slot;
	uint32_t old_slots = l->mask + 1;

	l->slot = calloc(slots, sizeof(*l->slot));
	if (!l->slot) {
		l->slot = old;
		return -ENOMEM;
	}
	l->mask = slots - 1;
	for (uint32_t i = 0; i < old_slots; i++)
		if (old[i].proto)
			l->slot[find(l, &old[i])] = old[i];
	free(old);
	return 0;
}

int nsdp_klive_add(struct nsdp_klive *l, const struct nsdp_kern_key *key)
{
	struct klive_slot s;
	uint32_t i;

	key_to_slot(key, &s);
	i = find(l, &s);
	if (l->slot[i].proto) {
		l->slot[i].gen = l->gen;
		return 1;
	}
	if (4 * (l->count + 1) > 3 * (uint64_t)(l->mask + 1)) {
		if (l->mask + 1 >= l->bound || grow(l) != 0)
			return -ENOSPC;
		i = find(l, &s);
	}
	s.gen = l->gen;
	l->slot[i] = s;
	l->count++;
	return 0;
}

/* Empty slot hole, shifting back every entry after it that may sit there
 * (its home is not between the hole and where it is). */
static void remove_at(struct nsdp_klive *l, uint32_t hole)
{
	uint32_t i = hole;

	for (;;) {
		uint32_t home;

		i = (i + 1) & l->mask;
		if (!l->slot[i].proto)
			break;
		home = slot_hash(l, &l->slot[i]) & l->mask;
		if (((i - home) & l->mask) >= ((i - hole) & l->mask)) {
			l->slot[hole] = l->slot[i];
			hole = i;
		}
	}
	l->slot[hole].proto = 0;
	l->count--;
}

int nsdp_klive_remove(struct nsdp_klive *l, const struct nsdp_kern_key *key)
{
	struct klive_slot s;
	uint32_t i;

	key_to_slot(key, &s);
	i = find(l, &s);
	if (!l->slot[i].proto)
		return 0;
	remove_at(l, i);
	return 1;
}

void nsdp_klive_begin(struct nsdp_klive *l)
{
	l->gen++;
}

/* A removal shifts later entries of the run back, possibly into slot i
 * (not looked at yet: look again). Where the run wraps round the end of
 * the array, entries from its start move too, but those were looked at
 * already, so carry the generation: a second look keeps them. */
uint64_t nsdp_klive_sweep(struct nsdp_klive *l,
			  void (*ended)(const struct nsdp_kern_key *key,
					void *arg),
			  void *arg)
{
	uint64_t n = 0;
	uint32_t i = 0;

	while (i <= l->mask) {
		struct klive_slot *s = &l->slot[i];
		struct nsdp_kern_key key = {0};

		if (!s->proto || s->gen == l->gen) {
			i++;
			continue;
		}
		key.orig = s->orig;
		key.reply = s->reply;
		key.zone = s->zone;
		key.proto = s->proto;
		key.family = s->family;
		remove_at(l, i);
		ended(&key, arg);
		n++;
	}
	return n;
}

uint64_t nsdp_klive_count(const struct nsdp_klive *l)
{
	return l->count;
}

size_t nsdp_klive_bytes(const struct nsdp_klive *l)
{
	return (size_t)(l->mask + 1) * sizeof(struct klive_slot);
}
