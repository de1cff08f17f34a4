/*
 * nsa_logmerge_pages.c - the merge's memory: large blocks in transparent
 * huge pages, and the thread that faults them in ahead of the merge.
 *
 * Invariants:
 * - A block under MERGE_HUGE_BYTES is the heap's (calloc, realloc, free);
 *   one at or above is mapped on its own, aligned to a huge page, its
 *   length whole huge pages (nsa_pages_len), so that growing it moves
 *   pages (mremap) and copies none.
 * - The faulter's thread only advises the kernel (MADV_POPULATE_WRITE
 *   writes nothing): the merge may write the same pages at any time, and
 *   a page it reaches first it faults itself.
 *
 * Not here: when a merge sizes itself and moves into the blocks
 * (nsa_logmerge.c).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "nsa_logmerge_pages.h"

/* Blocks of MERGE_HUGE_BYTES or more are mapped on their own and asked for
 * in transparent huge pages (a hint the kernel may refuse): the merge's
 * random accesses into them then miss the TLB far less. */
#define MERGE_HUGE_BYTES (4u << 20)
#define HUGE_PAGE (2u << 20)

size_t nsa_pages_len(size_t bytes)
{
	return (bytes + HUGE_PAGE - 1) & ~(size_t)(HUGE_PAGE - 1);
}

void *nsa_pages_alloc(size_t bytes)
{
	const size_t len = nsa_pages_len(bytes);
	size_t head;
	uint8_t *p;

	if (bytes < MERGE_HUGE_BYTES)
		return calloc(1, bytes);
	p = mmap(NULL, len + HUGE_PAGE, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	head = (HUGE_PAGE - (uintptr_t)p % HUGE_PAGE) % HUGE_PAGE;
	if (head)
		munmap(p, head);
	if (head != HUGE_PAGE)
		munmap(p + head + len, HUGE_PAGE - head);
	p += head;
	(void)madvise(p, len, MADV_HUGEPAGE);
	return p;
}

void nsa_pages_free(void *p, size_t bytes)
{
	if (p == NULL)
		return;
	if (bytes < MERGE_HUGE_BYTES)
		free(p);
	else
		munmap(p, nsa_pages_len(bytes));
}

void *nsa_pages_grow(void *p, size_t old, size_t bytes)
{
	void *q;

	if (bytes < MERGE_HUGE_BYTES)
		return realloc(p, bytes);
	if (old >= MERGE_HUGE_BYTES) {
		/* The pages move, none is copied. */
		q = mremap(p, nsa_pages_len(old), nsa_pages_len(bytes),
			   MREMAP_MAYMOVE);
		if (q == MAP_FAILED)
			return NULL;
		(void)madvise(q, nsa_pages_len(bytes), MADV_HUGEPAGE);
		return q;
	}
	q = nsa_pages_alloc(bytes);
	if (q == NULL)
		return NULL;
	memcpy(q, p, old);
	free(p);
	return q;
}

#define PREFAULT_STEP HUGE_PAGE
#define PREFAULT_LEAD (16u << 20)
#define PREFAULT_NAP_NS 100000

struct nsa_pages_faulter {
	pthread_t thread;
	uint8_t *head, *tail;
	size_t head_len, tail_len;
	atomic_int head_ready; /* the head is faulted in */
	atomic_size_t tail_used; /* bytes of the tail in use */
	atomic_int stop;
};

/* Fault [p, p + len) in, step by step, until stop: 0, or -1 stopped or
 * refused (a kernel without MADV_POPULATE_WRITE). */
static int fault_range(struct nsa_pages_faulter *f, uint8_t *p, size_t len)
{
	size_t done, n;

	for (done = 0; done < len; done += n) {
		n = len - done < PREFAULT_STEP ? len - done : PREFAULT_STEP;
		if (atomic_load_explicit(&f->stop, memory_order_relaxed) ||
		    madvise(p + done, n, MADV_POPULATE_WRITE) != 0)
			return -1;
	}
	return 0;
}

static void *fault_main(void *arg)
{
	struct nsa_pages_faulter *f = arg;
	const struct timespec nap = {.tv_nsec = PREFAULT_NAP_NS};
	size_t done, n;

	if (fault_range(f, f->head, f->head_len) != 0)
		return NULL;
	atomic_store_explicit(&f->head_ready, 1, memory_order_release);
	for (done = 0; done < f->tail_len; done += n) {
		while (done >= atomic_load_explicit(&f->tail_used,
						    memory_order_relaxed) +
				       PREFAULT_LEAD) {
			if (atomic_load_explicit(&f->stop,
						 memory_order_relaxed))
				return NULL;
			nanosleep(&nap, NULL);
		}
		n = f->tail_len - done < PREFAULT_STEP ? f->tail_len - done
						       : PREFAULT_STEP;
		if (fault_range(f, f->tail + done, n) != 0)
			return NULL;
	}
	return NULL;
}

struct nsa_pages_faulter *nsa_pages_fault_start(void *head, size_t head_bytes,
						void *tail, size_t tail_bytes)
{
	struct nsa_pages_faulter *f = calloc(1, sizeof(*f));

	if (f == NULL)
		return NULL;
	f->head = head;
	f->tail = tail;
	f->head_len = nsa_pages_len(head_bytes);
	f->tail_len = nsa_pages_len(tail_bytes);
	if (pthread_create(&f->thread, NULL, fault_main, f) != 0) {
		free(f);
		return NULL;
	}
	pthread_setname_np(f->thread, "nsa-prefault");
	return f;
}

int nsa_pages_head_ready(struct nsa_pages_faulter *f)
{
	return atomic_load_explicit(&f->head_ready, memory_order_acquire);
}

void nsa_pages_tail_used(struct nsa_pages_faulter *f, size_t bytes)
{
	atomic_store_explicit(&f->tail_used, bytes, memory_order_relaxed);
}

void nsa_pages_fault_stop(struct nsa_pages_faulter *f)
{
	if (f == NULL)
		return;
	atomic_store_explicit(&f->stop, 1, memory_order_relaxed);
	pthread_join(f->thread, NULL);
	free(f);
}
