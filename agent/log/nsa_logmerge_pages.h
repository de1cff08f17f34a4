/*
 * nsa_logmerge_pages.h - the merge's memory: large blocks mapped in
 * transparent huge pages, and a thread that faults two blocks in before
 * the merge writes them (nsa_logmerge.c, "a merge sized for what it
 * expects"). Private to the log layout's library.
 */
#ifndef NSA_LOGMERGE_PAGES_H
#define NSA_LOGMERGE_PAGES_H

#include <stddef.h>

/* The bytes a block of `bytes` takes: whole huge pages when it is mapped
 * on its own. */
size_t nsa_pages_len(size_t bytes);
/* A zeroed block of bytes, or NULL: from the heap when small, else mapped
 * on its own, aligned to a huge page and asked for in huge pages (a hint
 * the kernel may refuse). */
void *nsa_pages_alloc(size_t bytes);
/* Free a block of bytes from nsa_pages_alloc or nsa_pages_grow (NULL:
 * nothing). */
void nsa_pages_free(void *p, size_t bytes);
/* p, a block of old bytes, grown to bytes with its contents; NULL (p left
 * as it was) when out of memory. */
void *nsa_pages_grow(void *p, size_t old, size_t bytes);

/* A thread ("nsa-prefault") that faults in, with MADV_POPULATE_WRITE
 * (which writes nothing), the whole head block, then the tail block a
 * lead of 16 MiB ahead of what its user said it uses. */
struct nsa_pages_faulter;

/* Start faulting in blocks of nsa_pages_alloc: NULL when no thread could
 * start (nothing is faulted in ahead then). */
struct nsa_pages_faulter *nsa_pages_fault_start(void *head, size_t head_bytes,
						void *tail, size_t tail_bytes);
/* Whether the head block is faulted in (never, on a kernel that refuses
 * the advice). */
int nsa_pages_head_ready(struct nsa_pages_faulter *f);
/* The tail's first bytes are in use: the thread keeps its lead past them. */
void nsa_pages_tail_used(struct nsa_pages_faulter *f, size_t bytes);
/* Stop the thread and free f (the blocks stay the caller's). */
void nsa_pages_fault_stop(struct nsa_pages_faulter *f);

#endif
