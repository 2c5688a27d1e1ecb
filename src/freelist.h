/* SPDX-License-Identifier: MIT */
/* freelist.h - free objects linked through their first word, with the links encoded.
 *
 * A free small object's first word holds the next object of its list: in a thread cache,
 * a transfer cache, or a batch a refill hands over.  The word holds it encoded, as
 * glibc's safe-linking does and with a per-process secret besides: the next pointer XOR
 * the word's own address scrambled (times an odd constant) XOR the secret.  A linear
 * overflow from the object before, or a use after free, that writes the word cannot make
 * the list lead to an address of its choosing without the secret, and what it writes
 * decodes to a random-looking pointer, which the pop rejects: the fast path checks that it
 * is a quantum-aligned user-space address (fl_plausible), the walks that hand objects on
 * check that it is a region of a live slab of the list's class (freelist_valid). */
#ifndef TIDE_FREELIST_H
#define TIDE_FREELIST_H

#include <stdbool.h>
#include <stdint.h>

#include "pagemap.h"
#include "region.h"
#include "size_class.h"
#include "util.h"

extern uintptr_t freelist_secret TIDE_HIDDEN;
/* A free object's second word says where it is free, so that whoever takes it next can
 * tell that it really is (snmalloc's "sign on free, verify on consume"): free() itself
 * loads nothing from the block (a line another CPU may have written last) and only
 * stores.
 *   the key      on a list: a thread cache, a transfer cache, a refill's batch.  Every
 *                free stores it with the link; the pop that hands the object out checks
 *                it and clears it, and a return to the slab checks it.  An object freed
 *                twice is on lists twice: whichever copy is taken second finds the key
 *                gone and aborts, before the object is handed out again.  It is the
 *                object's own mask, the value its link is encoded with (fl_key): the
 *                free has it in a register already, and the pop forms it before the link
 *                loads, so neither loads a key (a malloc(64) + free pair: 71 instructions,
 *                73 with a key of its own).  It tells a reader no more than the link of a
 *                list's last object, which holds the mask of a NULL link, already does.
 *   the slab mark  free in its slab (its bitmap bit set), or never handed out: written
 *                when a slab is made and when an object goes back to it; a refill
 *                checks it before it lists the object (a free of an object back in its
 *                slab wrote the key over it).  Its low 4 bits differ from every key's
 *                (a key's are the secret's: objects start on 16-byte boundaries).
 * Both are drawn at start-up, 64-bit values a program does not leave by chance. */
extern uintptr_t freelist_slab_mark TIDE_HIDDEN;

/* Draw the secret and the slab mark (at start-up, before any list exists). */
void freelist_init(void);

/* The word's own address, scrambled (odd multiplier: a bijection; one instruction where
 * glibc's >> 12 takes a copy and a shift), so that a link read in one place says nothing
 * of the secret and a word copied to another place decodes to garbage. */
#define FL_MIX 0x5bd1e995u
TIDE_INLINE uintptr_t fl_mix_(const void *slot) { return (uintptr_t)slot * FL_MIX; }
/* What the link of the object at OBJ is encoded with, and its key. */
TIDE_INLINE uintptr_t fl_mask(const void *obj) { return fl_mix_(obj) ^ freelist_secret; }
TIDE_INLINE void *fl_key(const void *obj) { return (void *)fl_mask(obj); }
TIDE_INLINE void *fl_next(void *const *obj)
{
    /* The mask first: it is ready while the link loads, leaving one XOR after the load
     * on the path from one pop to the next. */
    return (void *)((uintptr_t)obj[0] ^ fl_mask(obj));
}
TIDE_INLINE void fl_set_next(void **obj, const void *next) { obj[0] = (void *)((uintptr_t)next ^ fl_mask(obj)); }
/* OBJ goes on a list before NEXT: its link and its key, from one mask. */
TIDE_INLINE void fl_list(void **obj, const void *next)
{
    uintptr_t m = fl_mask(obj);
    obj[0] = (void *)((uintptr_t)next ^ m);
    obj[1] = (void *)m;
}
/* The test the fast path can afford: a user-space address (bits 47-63 clear) aligned to
 * the quantum.  What a forged word decodes to passes it about once in 2^20 (the secret's
 * bits 47-62 and 0-3 are unknown to whoever forged it). */
#define FL_IMPLAUSIBLE ((~(uintptr_t)0 << 47) | (uintptr_t)(QUANTUM - 1))
TIDE_INLINE bool fl_plausible(const void *next) { return ((uintptr_t)next & FL_IMPLAUSIBLE) == 0; }

/* OBJ, popped from a list to be handed out: its KEY (fl_key) is checked and cleared in
 * one instruction (a xor in memory, whose result is zero only when the word held the
 * key), on the line the pop reads the link from; on to LABEL when it was not: OBJ was
 * handed out since it was listed (a double free listed it twice), or a use after free
 * wrote it. */
#if defined(__x86_64__)
#define FL_TAKE_KEY_OR_GOTO(obj, key, label)                                                       \
    __asm__ goto("xorq %[k], %[word]\n\tjnz %l[" #label "]"                                     \
                 : [word] "+m"(((void **)(obj))[1])                                                \
                 : [k] "r"(key)                                                                    \
                 : "cc"                                                                            \
                 : label)
#else
#define FL_TAKE_KEY_OR_GOTO(obj, key, label)                                                       \
    do {                                                                                           \
        uintptr_t w_ = (uintptr_t)((void **)(obj))[1] ^ (key);                                     \
        ((void **)(obj))[1] = (void *)w_;                                                          \
        if (unlikely(w_ != 0))                                                                     \
            goto label;                                                                            \
    } while (0)
#endif
/* The same, true when OBJ held its key (for the slow paths). */
TIDE_INLINE bool fl_take_key(void **obj)
{
    FL_TAKE_KEY_OR_GOTO(obj, fl_mask(obj), lost);
    return true;
lost:
    return false;
}
/* The pop of OBJ found its key gone: "tide: FUNC(): double free 0x...", abort. */
__attribute__((noreturn, cold)) void freelist_lost_key(const char *func, const void *obj);

/* A block of class CLS at the head of a list is not a free one, as WHY says:
 * "tide: FUNC(): corrupted free list: 0x... (a block of N bytes) WHY", abort. */
__attribute__((noreturn, cold)) void freelist_bad_block(const char *func, const void *obj, unsigned cls,
                                                         const char *why);
/* A corrupted link in a list of class CLS: "tide: FUNC(): corrupted free list ...", abort. */
__attribute__((noreturn, cold)) void freelist_corrupt(const char *func, const void *obj, const void *next,
                                                       unsigned cls);
/* malloc's pop of OBJ, a region of a slab, found its key gone (freelist_lost_key: the
 * pop's xor left the word nonzero) or else its link implausible (freelist_corrupt, the
 * class told by OBJ's page).  The link is read again here: the fast path keeps no
 * register for it, nor for the class. */
__attribute__((noreturn, cold)) void freelist_bad_pop(void *const *obj);
/* Whether NEXT (not NULL) is a region of a live slab of class CLS (a large class: the
 * first page of a block of that class). */
bool freelist_valid(const void *next, unsigned cls);
/* The descriptor of NEXT when it is a free block of class CLS (the check of
 * freelist_valid): its slab, or for a large class the block's extent; else NULL.  A walk
 * that needs the descriptor anyway checks and finds it in one page-map read. */
void *freelist_block_of(const void *next, unsigned cls);
/* The next object after OBJ in a list of class CLS, checked fully; aborts with FUNC's name
 * when the link is corrupted. */
void *freelist_next_checked(void *const *obj, unsigned cls, const char *func);

/* freelist_valid's check where it is cheap, inline: NEXT in the first range, whose page-map
 * entry (in *ENTRY) carries CLS (the class tag is the same test for small and large classes,
 * CLS < SC_NCACHED), and NEXT the start of a region of it (a large block: its first page).
 * That implies fl_plausible.  False says nothing: NEXT may be in another range (the out-of-line
 * functions above look), or NULL. */
TIDE_INLINE bool fl_valid_first_range(const void *next, unsigned cls, pm_entry_t *entry)
{
    uintptr_t a = (uintptr_t)next;
    const range_t *r = &region.ranges[0];
    uintptr_t base = r->base, off = a - base;
    if (unlikely(off >= ATOMIC_LOAD(&r->span)))
        return false;
    pm_entry_t e = pm_read_offset(base, off);
    *entry = e;
    if (unlikely(pm_slab_class(e) != cls))
        return false;
    return cls < SC_NSMALL ? sc_starts_region(cls, a - pm_slab_base(e, a)) : (a & PAGE_MASK) == 0;
}

/* freelist_next_checked, with the common case inline (a pop on a slow path, a walk). */
TIDE_INLINE void *fl_next_checked(void *const *obj, unsigned cls, const char *func)
{
    void *next = fl_next(obj);
    pm_entry_t e;
    if (likely(fl_valid_first_range(next, cls, &e)) || !next)
        return next;
    return freelist_next_checked(obj, cls, func);
}

/* freelist_block_of (NEXT not NULL), with the common case inline. */
TIDE_INLINE void *fl_block_of(const void *next, unsigned cls)
{
    pm_entry_t e;
    if (likely(fl_valid_first_range(next, cls, &e)))
        return pm_desc(e);
    return freelist_block_of(next, cls);
}

#endif
