# SPDX-License-Identifier: MIT
# test/unit/: modules by themselves, linked with the check-only build of libtide
# (test/libtide_fault.la: TIDE_ASSERT on, every internal name links), which is then the
# malloc of the test process as libtide is for the other suites.
#   page_heap   extent.c: best fit, split, coalescing, span merges, descriptors
#   rbtree      rbtree.c against a sorted array, with the red-black rules walked
#   size_class  size_class.h and its generated table against the documented rule
#   transfer    transfer.c: LIFO lists, the per-class and per-arena limits, draining
#   pagemap     pagemap.h: every entry made is read back as what it is
#   prof_math   prof_math.c's logarithm (its sampling intervals) against libm's
#   refill      tcache.c: a cache refills from the arena of its thread's CPU
#   tcache      tcache.c: capacities grow to 512 KiB a class, within the thread's 4 MiB budget
#   lock        lock.h's ranks: a lock taken out of order aborts naming both; fork takes them in order
#   child       test/support/child.c, the harness's child runner: a killed test takes its child with it
if HAVE_CRITERION
tide_unit_suites = test/unit/page_heap test/unit/rbtree test/unit/size_class test/unit/transfer test/unit/pagemap test/unit/prof_math test/unit/refill test/unit/tcache test/unit/lock test/unit/child
check_PROGRAMS += $(tide_unit_suites)
TESTS += $(tide_unit_suites)
tide_unit_cppflags = $(rel_cppflags) -I$(top_srcdir)/src -I$(top_builddir)/src -DTIDE_DEBUG
tide_unit_cflags = $(rel_cflags) $(CRITERION_CFLAGS)
tide_unit_ldadd = test/libtide_fault.la $(CRITERION_LIBS) $(PTHREAD_LIBS)

test_unit_page_heap_SOURCES = test/unit/page_heap.c $(tide_test_support)
test_unit_page_heap_CPPFLAGS = $(tide_unit_cppflags)
test_unit_page_heap_CFLAGS = $(tide_unit_cflags)
test_unit_page_heap_LDFLAGS = $(rel_ldflags)
test_unit_page_heap_LDADD = $(tide_unit_ldadd)

test_unit_rbtree_SOURCES = test/unit/rbtree.c $(tide_test_support)
test_unit_rbtree_CPPFLAGS = $(tide_unit_cppflags)
test_unit_rbtree_CFLAGS = $(tide_unit_cflags)
test_unit_rbtree_LDFLAGS = $(rel_ldflags)
test_unit_rbtree_LDADD = $(tide_unit_ldadd)

test_unit_size_class_SOURCES = test/unit/size_class.c $(tide_test_support)
test_unit_size_class_CPPFLAGS = $(tide_unit_cppflags)
test_unit_size_class_CFLAGS = $(tide_unit_cflags)
test_unit_size_class_LDFLAGS = $(rel_ldflags)
test_unit_size_class_LDADD = $(tide_unit_ldadd)

test_unit_transfer_SOURCES = test/unit/transfer.c $(tide_test_support)
test_unit_transfer_CPPFLAGS = $(tide_unit_cppflags)
test_unit_transfer_CFLAGS = $(tide_unit_cflags)
test_unit_transfer_LDFLAGS = $(rel_ldflags)
test_unit_transfer_LDADD = $(tide_unit_ldadd)

test_unit_pagemap_SOURCES = test/unit/pagemap.c $(tide_test_support)
test_unit_pagemap_CPPFLAGS = $(tide_unit_cppflags)
test_unit_pagemap_CFLAGS = $(tide_unit_cflags)
test_unit_pagemap_LDFLAGS = $(rel_ldflags)
test_unit_pagemap_LDADD = $(tide_unit_ldadd)

test_unit_prof_math_SOURCES = test/unit/prof_math.c $(tide_test_support)
test_unit_prof_math_CPPFLAGS = $(tide_unit_cppflags)
test_unit_prof_math_CFLAGS = $(tide_unit_cflags)
test_unit_prof_math_LDFLAGS = $(rel_ldflags)
test_unit_prof_math_LDADD = $(tide_unit_ldadd) -lm

test_unit_refill_SOURCES = test/unit/refill.c $(tide_test_support)
test_unit_refill_CPPFLAGS = $(tide_unit_cppflags)
test_unit_refill_CFLAGS = $(tide_unit_cflags)
test_unit_refill_LDFLAGS = $(rel_ldflags)
test_unit_refill_LDADD = $(tide_unit_ldadd)

test_unit_tcache_SOURCES = test/unit/tcache.c $(tide_test_support)
test_unit_tcache_CPPFLAGS = $(tide_unit_cppflags)
test_unit_tcache_CFLAGS = $(tide_unit_cflags)
test_unit_tcache_LDFLAGS = $(rel_ldflags)
test_unit_tcache_LDADD = $(tide_unit_ldadd)

test_unit_lock_SOURCES = test/unit/lock.c $(tide_test_support)
test_unit_lock_CPPFLAGS = $(tide_unit_cppflags)
test_unit_lock_CFLAGS = $(tide_unit_cflags)
test_unit_lock_LDFLAGS = $(rel_ldflags)
test_unit_lock_LDADD = $(tide_unit_ldadd)

test_unit_child_SOURCES = test/unit/child.c $(tide_test_support)
test_unit_child_CPPFLAGS = $(tide_unit_cppflags)
test_unit_child_CFLAGS = $(tide_unit_cflags)
test_unit_child_LDFLAGS = $(rel_ldflags)
test_unit_child_LDADD = $(tide_unit_ldadd)
endif
