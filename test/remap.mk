# Large realloc: in place, mremap moves, heals, the VMA budget (test_remap.c).
if HAVE_CRITERION
check_PROGRAMS += test/test_remap
TESTS += test/test_remap
endif
test_test_remap_SOURCES = test/test_remap.c
test_test_remap_CPPFLAGS = $(AM_CPPFLAGS) $(CRITERION_CFLAGS)
test_test_remap_LDADD = src/libtide.la $(CRITERION_LIBS)
test_test_remap_LDFLAGS = -no-install
