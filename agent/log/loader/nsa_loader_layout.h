/*
 * nsa_loader_layout.h - what the loader's files share (agent/log/loader/
 * and nsa_loader.c; no other room includes it): the kinds of reply the
 * connection owes, and the interface of a layout's reader.
 *
 * The loader is shared machinery (nsa_loader.c drives a load,
 * nsa_loader_list.c lists keys and asks their values, nsa_loader_ask.c
 * reads a migrating slot's target) over one reader per store layout
 * (nsa_loader_keys.c, nsa_loader_log.c), each behind struct
 * nsa_loader_layout, chosen once when the loader opens.
 */
#ifndef NSA_LOADER_LAYOUT_H
#define NSA_LOADER_LAYOUT_H

#include <string.h>

#include <hiredis/hiredis.h>

#include "ns_slot.h"
#include "nsa_loader_state.h"

/* CLUSTER GETKEYSINSLOT's count: every key of the slot. */
#define NSA_SLOT_MAX_KEYS "1000000000"
/* Sessions decoded ahead of their apply, so that the sink can prefetch
 * their table buckets. */
#define NSA_APPLY_CHUNK 16

/* What a reply due on the loader's connection answers (nsa_exp kind). */
enum nsa_loader_op {
	NSA_LD_SCAN, /* SCAN: keys and the next cursor */
	NSA_LD_SLOT, /* CLUSTER GETKEYSINSLOT */
	NSA_LD_MGET, /* the values of listed keys */
	NSA_LD_PROBE, /* whether the node serves a slot (nsa_loader_list.c) */
	NSA_LD_READER, /* a command of the layout's reader: its on_reply */
};

/* One store layout's reader. Hooks marked optional may be NULL. */
struct nsa_loader_layout {
	const char *scan_match; /* SCAN MATCH pattern */
	/* Keys asked for in one MGET at most (0: every key of a listing, or
	 * of one of its slots): large values in smaller replies, so that
	 * the store sends the next while the reader handles one. */
	unsigned int mget_keys;
	/* SCAN's COUNT (NULL: NSA_SCAN_COUNT): each SCAN reply's MGETs are
	 * sent as it comes, so this is how much the store builds at once
	 * while the reader waits for the first of them. */
	const char *scan_count;
	/* MGETs of one listing's keys in flight at most (0: all at once):
	 * a cluster slot may hold a thousand segments, which at once would
	 * be 12 MB built before the reader gets the first. */
	unsigned int mget_window;
	/* Whether the loader reads k, a key under natsync's prefix: 1, 0
	 * when it is the other layout's, -1 when it is not valid (counted as
	 * bad). */
	int (*key_wanted)(const redisReply *k);
	/* Optional. A load begins: 0, or -ENOMEM. Commands it queues come
	 * before the first key listing. */
	int (*begin)(struct nsa_loader *ld);
	/* Values v (nil: expired since listed) of keys k, n of each: 0, or
	 * -ENOMEM (the load fails). */
	int (*values)(struct nsa_loader *ld, const redisReply *const *k,
		      redisReply *const *v, size_t n);
	/* Optional. The reply to a command it queued as NSA_LD_READER. */
	void (*on_reply)(struct nsa_loader *ld, const redisReply *r);
	/* Every key listed on the connection is read: NSA_LOADER_DONE,
	 * NSA_LOADER_MORE (it queued more), NSA_LOADER_FAILED or
	 * NSA_LOADER_RACED (why in ld->why). */
	int (*finish)(struct nsa_loader *ld);
	/* Optional. Free what the reader holds (the loader closes). */
	void (*close)(struct nsa_loader *ld);
};

/* Whether k is under natsync's prefix "ns:". */
static inline int nsa_loader_key_ours(const redisReply *k)
{
	return k->type == REDIS_REPLY_STRING && k->len >= NS_KEY_PREFIX_LEN &&
	       memcmp(k->str, NS_KEY_PREFIX, NS_KEY_PREFIX_LEN) == 0;
}

/* Whether k, one of natsync's, is named as the log layout's ("ns:l:..."). */
static inline int nsa_loader_key_of_log(const redisReply *k)
{
	return k->len > NS_SEGMENT_PREFIX_LEN &&
	       memcmp(k->str, NS_SEGMENT_PREFIX, NS_SEGMENT_PREFIX_LEN) == 0;
}

/* Whether the loader reads key k: 1, 0 when it is not natsync's (or of
 * the other layout), -1 when it is under natsync's prefix but not valid. */
static inline int nsa_loader_key_wanted(const struct nsa_loader *ld,
					const redisReply *k)
{
	return nsa_loader_key_ours(k) ? ld->layout->key_wanted(k) : 0;
}

/* Whether the load reads the sessions of the master the connection is
 * to (its slots are listed and probed there). */
static inline int nsa_loader_conn_loaded(const struct nsa_loader *ld)
{
	return ld->conn_node == ld->node || ld->every_master;
}

/* Whether the map gives slot to the master the connection is to. */
static inline int nsa_loader_node_slot(const struct nsa_loader *ld,
				       uint32_t slot)
{
	return ld->topo->slot_covered[slot] &&
	       ld->topo->slot_node[slot] == ld->conn_node;
}

/* Whether the load reads the sessions of slot: the map gives it to the
 * master being loaded, or to any master when it loads every master. */
static inline int nsa_loader_keeps_slot(const struct nsa_loader *ld,
					uint32_t slot)
{
	return ld->topo->slot_covered[slot] &&
	       (ld->every_master || ld->topo->slot_node[slot] == ld->node);
}

#endif
